# Who allocates, from a callgrind file recorded with the allocator's entry points separated by
# their callers (benches/profile.sh allocations): each call into jemalloc's malloc, mallocx,
# calloc, realloc or rallocx is charged to the innermost frame of its caller chain that belongs
# to hyper's family (hyper, hyper_util, h2) or to af's own crates (af_*). The library frames in
# between (std, tokio, http, bytes, serde, ...) are tools of whoever called them, so a frame of
# theirs charges nobody; a chain that reaches neither family is charged as "other".
#
#   awk -v requests=N -f benches/alloc-sites.awk FILE
#
# Prints the allocations per request of each owner, then each site (the owning frame and the
# library function under it that allocated), most first.

# Callgrind compresses names: `fn=(7) name` defines id 7, a later `fn=(7)` or `cfn=(7)` reuses it.
function name_of(field,    id, rest) {
  if (match(field, /^\([0-9]+\)/)) {
    id = substr(field, 2, RLENGTH - 2)
    rest = substr(field, RLENGTH + 2)
    if (rest != "") names[id] = rest
    return names[id]
  }
  return field
}

# A frame's name without the legacy mangling's hash.
function bare(frame) {
  if (match(frame, /::h[0-9a-f]+$/) && RLENGTH == 19) frame = substr(frame, 1, RSTART - 1)
  return frame
}

# The crate family that owns a frame, or "" for a library frame that charges nobody.
function owner(frame,    crate) {
  crate = frame
  sub(/^</, "", crate)
  sub(/::.*/, "", crate)
  if (crate ~ /^af_/) return crate
  if (crate == "hyper" || crate == "hyper_util" || crate == "h2") return "hyper's own (" crate ")"
  return ""
}

/^cfn=/ { callee = name_of(substr($0, 5)); next }
/^fn=/ { name_of(substr($0, 4)); next }
/^calls=/ {
  if (callee ~ /^_rjem_(malloc|mallocx|calloc|realloc|rallocx)'/) {
    split($1, call, "=")
    calls[callee] += call[2]
  }
}

END {
  if (requests <= 0) { print "requests=N is needed" > "/dev/stderr"; exit 1 }
  for (chain in calls) {
    n = split(chain, frames, "'")
    who = ""; tool = bare(frames[2])
    for (i = 2; i <= n && who == ""; i++) {
      frame = bare(frames[i])
      who = owner(frame)
      if (who == "") tool = frame
    }
    site = frame
    if (who == "") { who = "other"; site = tool = bare(frames[2]) }
    by_owner[who] += calls[chain]
    by_site[who "\t" site "\t" tool] += calls[chain]
    total += calls[chain]
  }
  printf "allocations (calls into the allocator, reallocations included): %d in %d requests, %.1f per request\n\n", total, requests, total / requests
  print "## by owner (per request)"
  cmd = "sort -t'\t' -k1,1nr"
  for (who in by_owner) printf "%.2f\t%s\n", by_owner[who] / requests, who | cmd
  close(cmd)
  print ""
  print "## by site (per request, from 0.05): owner, owning frame, the library function under it"
  for (key in by_site) {
    if (by_site[key] / requests >= 0.05) printf "%.2f\t%s\n", by_site[key] / requests, key | cmd
  }
  close(cmd)
}
