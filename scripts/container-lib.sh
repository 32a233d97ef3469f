# Sourced by the scripts that build or run genie's container images
# (scripts/test-image, scripts/test-pg17, bench/pgvector-bench): which
# engine, its options, and a Debian base image made without a registry.
#
# container_engine WHO: sets engine (ENGINE, else podman, else docker),
# run_opts and build_opts, or returns 1 after saying so (WHO names the
# caller).  podman runs with runc, and with no default rlimits, which the
# kernels of CI's machines refuse: a containers.conf of its own
# (CONTAINERS_CONF, exported; container_cleanup removes it).  Builds get the
# host's network (apt inside).
container_engine() {
  engine=${ENGINE:-$(command -v podman || command -v docker || true)}
  if [ -z "$engine" ]; then
    echo "$1: neither podman nor docker is installed" >&2
    return 1
  fi
  run_opts=() build_opts=(--network host)
  container_conf=
  if [[ $engine == *podman ]]; then
    run_opts+=(--runtime runc)
    build_opts+=(--runtime runc)
    container_conf=$(mktemp)
    printf '[containers]\ndefault_ulimits = []\n' >"$container_conf"
    export CONTAINERS_CONF=$container_conf
  fi
}

container_cleanup() {
  [ -z "${container_conf:-}" ] || rm -f "$container_conf"
}

# container_debian_base SUITE IMAGE WHO: imports IMAGE (for example
# localhost/debian-trixie) from `debootstrap --variant=minbase SUITE` of
# Debian's archive unless the engine already has it (root needed).
container_debian_base() {
  local suite=$1 image=$2 who=$3 root start
  # image inspect, not podman's image exists: docker has no such command
  "$engine" image inspect "$image" >/dev/null 2>&1 && return 0
  root=$(mktemp -d)
  echo "$who: debootstrap $suite into $root"
  start=$(date +%s)
  debootstrap --variant=minbase "$suite" "$root" http://deb.debian.org/debian >/dev/null || { rm -rf "$root"; return 1; }
  tar -C "$root" -c . | "$engine" import - "$image" >/dev/null || { rm -rf "$root"; return 1; }
  rm -rf "$root"
  echo "$who: base image $image in $(( $(date +%s) - start )) s"
}
