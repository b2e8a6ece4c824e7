#!/usr/bin/env bash
# tools/bench_bundle.sh — the bench on a Linux host without Bazel: one archive with psring's bench suites, the
# programs they start, their data, their shared libraries and the network tools the emulated cluster runs.
#
#   ./bazelw build //...  &&  tools/bench_bundle.sh DIR      # the build host: writes DIR and DIR.tar.xz (46 MiB)
#   tools/bench_bundle.sh DIR --with-cuda-libs              # with cuBLAS and NCCL too (594 MiB compressed: over
#                                                           # the 64 MiB limit, allowed for a host without them)
#   tools/bench_bundle.sh DIR --without-net-tools           # without Debian's ip, tc, iptables and sysctl
#   tar xJf DIR.tar.xz  &&  DIR/bench.sh SUITE [flags...]   # the other host (root, for network namespaces)
#   DIR/bench.sh --help                                     # this text
#
# SUITE is one of compare, scaling, calibrate, validate, crossover_maps, allreduce_bench, cluster_run: the
# bundle's copy of bazel-bin/bench/SUITE, given the flags unchanged (SUITE --help lists them); its exit status
# is bench.sh's. Outputs go where the suite puts them outside `bazel run`: --out_dir, else a fresh $TMPDIR/psring-SUITE-XXXXXX it prints.
#
# What DIR carries:
#   bin/      a wrapper per program: the suites and every program among their runfiles (ring/ring_worker,
#             ps/server, ps/worker, bench/emulator/netdelay, ...: read from the runfiles manifests). Each gives
#             its program the bundle's libraries, and it alone: the suites get them through the loader's
#             --library-path (so what a suite starts, the host's ip or python3, never sees them), the programs
#             a suite starts through LD_LIBRARY_PATH set in their own wrapper. ring_worker and ps/worker get
#             --data_dir=DIR/data/fashion-mnist before the flags they are given (a later --data_dir wins).
#   libexec/  the binaries; each suite with its Bazel runfiles tree rebuilt from its runfiles manifest (links to
#             the wrappers of the programs it starts, the committed model
#             bench/results/committed_model.json, bench/tools/gloo_allreduce.py), so it finds
#             them as under `bazel run`. Workload presets (bench/workloads/) are compiled into the binaries.
#   lib/      every shared library ldd lists for them except glibc's (libc, libm, libpthread, libdl, librt,
#             ld-linux) and the driver's (libcuda, libnvidia-*), and cuBLAS and NCCL unless --with-cuda-libs
#             (--without-cuda-libs, the default, as in gpu_check.sh): about 810 MB that xz hardly shrinks, which
#             the workers link although the bench runs CPU ranks. Their names go to DIR/host_libs, and bench.sh
#             finds them on the host: a CUDA 13 toolkit or python3's nvidia-* wheels (PyTorch's).
#   data/     Debian's Fashion-MNIST (/usr/share/datasets/fashion-mnist), which compare's part 2 trains on.
#   net/      Debian 12's ip, tc, iptables (xtables-legacy-multi) and sysctl with their libraries, and the
#             libxt_*.so modules (XTABLES_LIBDIR), each behind a wrapper like the programs'; and tcpdump with
#             libpcap where this host has it (optional: apt-get install tcpdump), for tools/ below.
#   tools/    bench/tools/window_round_capture.py: where a PS window round's time goes, by packet capture
#             (bench/PERFORMANCE.md 9.29; its --help says how to run it from the bundle).
# Checks, on the build host (any failure: a line saying what, exit 1): every binary and runfile is built and
# copied; every library each bundled binary or tool loads comes from the bundle but glibc's, the driver's and
# the ones left to the host; every program's --help and every carried tool runs from the bundle; DIR.tar.xz is
# at most 64 MiB unless --with-cuda-libs (its size is printed).
#
# bench.sh, on the other host: prints the bundle's commit and this host's cores; for the suites that build an
# emulated cluster, takes the host's ip, tc, iptables and sysctl when all four are found (PATH, then /usr/sbin,
# /sbin, /usr/bin, /bin: where the suites look) and run, else the carried ones (first in PATH), and prints which
# ("# net tools: ..."); PSRING_BUNDLE_NET_TOOLS=host or =carried forces either. It loads br_netfilter with the
# host's modprobe when the kernel lacks it (--latency needs it; the bundle carries no modprobe). Unless the
# bundle carries them, it finds cuBLAS and NCCL on the host (the loader's cache, LD_LIBRARY_PATH,
# /usr/local/cuda*, python3's nvidia-* wheels), says where, and stops when one is missing (the workers would
# not start).
#
# Cores per emulated host: the emulated hosts share this host's cores, and a run wants about one core per
# process it starts: N workers, plus the servers (ps-1: one server host; ps-colocated: N shards, one beside each
# worker, so 2N processes; ps-dedicated: K = --ps_servers more hosts), plus the delay program on the switch
# (--latency > 0) and the kernel's veth, bridge and tbf work. compare's largest runs are ps-colocated at N = 8
# (16 processes) and ps-dedicated at N = 8 (10 hosts). Measured: on psring's 2-core development machine the
# co-located PS beyond 8 x 100 Mbit/s, 4 x 400 Mbit/s or 2 x 1 Gbit/s, and most PS runs at N >= 4 on 1 Gbit/s,
# were EMULATOR-BOUND (bench/PERFORMANCE.md 1.2-1.4); a 16-core host ran 7-11 emulated hosts with 24 of 24
# held-out runs unmarked and link checks at 95.7 % of the link. So a 16- or 64-core server emulates 8-32 hosts
# with a core or more each. Nothing here assumes it: every run samples the host's CPU (busy share, runnable
# tasks waiting for a core, the delay program's late packets) and a run where the CPU, not the link, bound is
# marked EMULATOR-BOUND and never fitted or judged.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SUITES=(compare scaling calibrate validate crossover_maps allreduce_bench cluster_run)
PROGRAMS=()  # what the suites start: every runfile of theirs that is a program (find_programs)
TRAINING_PROGRAMS=" ring/ring_worker ps/worker "  # take --data_dir
FASHION_MNIST=/usr/share/datasets/fashion-mnist
NET_TOOLS=(ip tc xtables-legacy-multi sysctl)
MAX_ARCHIVE_BYTES=$((64 << 20))
# Libraries that come from the other host, never the bundle: glibc's and the driver's.
HOST_LIBS='^(libc\.so|libm\.so|libpthread\.so|libdl\.so|librt\.so|ld-linux|libcuda\.so|libnvidia-)'
# What the bundle leaves to the host unless --with-cuda-libs (gpu_check.sh's --without-cuda-libs).
HOST_CUDA_LIBS='^(libcublas\.so|libcublasLt\.so|libnccl\.so)'

usage() { sed -n '2,/^set -uo pipefail/p' "${BASH_SOURCE[0]}" | sed '$d' | sed -E 's/^# ?//'; }

# ------------------------------------------------------------------------------------------------------------
# The build host: bundle DIR [--with-cuda-libs] [--without-net-tools]
# ------------------------------------------------------------------------------------------------------------

bad=0
problem() { echo "bench_bundle: $*"; bad=1; }

# copy_libs BINARY LIBDIR: the libraries ldd lists for BINARY into LIBDIR, but the host's; cuBLAS/NCCL to
# $left instead when $slim. A library "not found" here is a problem (the bundle would lack it).
copy_libs() {
  local binary="$1" libdir="$2" name path
  while read -r name path; do
    if [[ "$path" == "not" ]]; then
      grep -q -E "$HOST_LIBS" <<<"$name" || problem "$binary: $name not found on this host"
    elif grep -q -E "$HOST_LIBS" <<<"$name"; then
      :
    elif [[ -n "$slim" ]] && grep -q -E "$HOST_CUDA_LIBS" <<<"$name"; then
      left+=" $name"
    elif [[ ! -e "$libdir/$name" ]]; then
      cp -L "$path" "$libdir/$name" || problem "cannot copy $path"
    fi
  done < <(ldd "$binary" | awk '$2 == "=>" {print $1, $3}')
}

# check_libs BINARY LIBDIR: what the other host's loader will do, given LIBDIR: every library from LIBDIR but
# glibc's, the driver's and those left to the host.
check_libs() {
  local binary="$1" libdir="$2" name path
  while read -r name path; do
    grep -q -E "$HOST_LIBS" <<<"$name" && continue
    [[ -n "$slim" ]] && grep -q -E "$HOST_CUDA_LIBS" <<<"$name" && continue
    [[ "$path" == "$libdir/"* ]] || problem "bundled ${binary#"$dir"/} loads $name from '$path', not from the bundle"
  done < <(LD_LIBRARY_PATH="$libdir" ldd "$binary" | awk '$2 == "=>" {print $1, $3}')
}

# write_wrapper PATH KIND REAL [FIRST_ARG]: the script at DIR/PATH that runs DIR/REAL with the bundle's
# libraries (KIND loader: DIR/lib through the loader's --library-path; env: DIR/lib in LD_LIBRARY_PATH; net:
# DIR/net/lib through the loader, and XTABLES_LIBDIR for iptables and tc), FIRST_ARG before the caller's
# arguments. The bundle's root is found from the script's own resolved path, so links to it (runfiles) work.
write_wrapper() {
  local path="$1" kind="$2" real="$3" first="${4:-}" up depth i
  depth=$(($(tr -cd / <<<"$path" | wc -c)))
  up=""
  for ((i = 0; i < depth; i++)); do up+="/.."; done
  mkdir -p "$(dirname "$dir/$path")" || return 1
  {
    echo '#!/bin/sh'
    echo "# psring bench bundle: runs $real with the bundle's libraries, for it alone (tools/bench_bundle.sh)."
    echo "root=\$(cd \"\$(dirname \"\$(readlink -f \"\$0\")\")$up\" && pwd) || exit 1"
    case "$kind" in
      loader)
        echo "exec $interp --library-path \"\${PSRING_BUNDLE_LIBS:-\$root/lib}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\" \\"
        echo "  \"\$root/$real\" ${first:+"$first "}\"\$@\""
        ;;
      env)
        echo "LD_LIBRARY_PATH=\"\${PSRING_BUNDLE_LIBS:-\$root/lib}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\""
        echo "export LD_LIBRARY_PATH"
        echo "exec \"\$root/$real\" ${first:+"$first "}\"\$@\""
        ;;
      net)
        if [[ "$real" == */iptables || "$real" == */tc ]]; then
          echo "XTABLES_LIBDIR=\"\$root/net/xtables\""
          echo "export XTABLES_LIBDIR"
        fi
        echo "exec $interp --library-path \"\$root/net/lib\" \"\$root/$real\" \"\$@\""
        ;;
    esac
  } >"$dir/$path" && chmod 755 "$dir/$path"
}

is_elf() { [[ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" == '177ELF' ]]; }

# find_programs: PROGRAMS = the suites' runfiles that are programs (ring/ring_worker, ps/server, ...), from
# their runfiles manifests, so a program a suite gains in bench/BUILD.bazel travels without a change here.
find_programs() {
  local suite rloc target
  for suite in "${SUITES[@]}"; do
    [[ -r "$root/bazel-bin/bench/$suite.runfiles_manifest" ]] ||
      { problem "no bazel-bin/bench/$suite.runfiles_manifest: run ./bazelw build //... first"; continue; }
    while read -r rloc target; do
      [[ "$rloc" == "psring/bench/$suite" || -z "$target" ]] && continue
      is_elf "$target" || continue
      if [[ "$rloc" != psring/* ]]; then
        problem "$suite's runfile $rloc is a program from another repository"
      elif [[ " ${PROGRAMS[*]} " != *" ${rloc#psring/} "* ]]; then
        PROGRAMS+=("${rloc#psring/}")
      fi
    done <"$root/bazel-bin/bench/$suite.runfiles_manifest"
  done
}

# runfiles SUITE: libexec/bench/SUITE.runfiles from bazel-bin's manifest: programs (PROGRAMS) as links to their
# wrappers, data files copied once into share/ and linked.
runfiles() {
  local suite="$1" rloc target rel link program
  while read -r rloc target; do
    rel="${rloc#psring/}"
    [[ "$rel" == "bench/$suite" ]] && continue
    link="$dir/libexec/bench/$suite.runfiles/$rloc"
    mkdir -p "$(dirname "$link")" || return 1
    program=""
    [[ "$rloc" == psring/* && " ${PROGRAMS[*]} " == *" $rel "* ]] && program="$dir/bin/$rel"
    if [[ -n "$program" ]]; then
      ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$program")" "$link" || return 1
    elif [[ -z "$target" ]]; then
      : >"$link"
    else
      if [[ ! -e "$dir/share/$rloc" ]]; then
        if ! mkdir -p "$(dirname "$dir/share/$rloc")" || ! cp -L "$target" "$dir/share/$rloc"; then
          problem "cannot copy $target"
        fi
      fi
      ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$dir/share/$rloc")" "$link" || return 1
    fi
  done <"$root/bazel-bin/bench/$suite.runfiles_manifest"
}

bundle() {
  local b s t lib tool archive size
  root="$(cd "$here/.." && pwd)"
  if [[ -e "$dir" && -n "$(ls -A "$dir" 2>/dev/null)" ]]; then
    [[ -f "$dir/BUNDLE_INFO" ]] || { echo "bench_bundle: $dir is not empty and not a bench bundle: pick a new folder"; return 1; }
    rm -rf "$dir" || return 1
  fi
  mkdir -p "$dir/lib" "$dir/libexec" "$dir/data" || return 1
  find_programs
  for b in "${SUITES[@]/#/bench/}" "${PROGRAMS[@]}"; do
    [[ -x "$root/bazel-bin/$b" ]] || { echo "bench_bundle: missing $root/bazel-bin/$b: run ./bazelw build //... first"; return 1; }
  done
  interp=$(ldd "$root/bazel-bin/bench/compare" | awk '$1 ~ /^\// && $2 ~ /^\(/ {print $1; exit}')
  [[ -n "$interp" ]] || { echo "bench_bundle: cannot tell the loader bazel-bin/bench/compare asks for"; return 1; }

  # psring's binaries, their wrappers and libraries.
  for b in "${SUITES[@]/#/bench/}" "${PROGRAMS[@]}"; do
    mkdir -p "$dir/libexec/$(dirname "$b")" || return 1
    cp -L "$root/bazel-bin/$b" "$dir/libexec/$b" || problem "cannot copy bazel-bin/$b"
    copy_libs "$root/bazel-bin/$b" "$dir/lib"
    if [[ " ${SUITES[*]/#/bench/} " == *" $b "* ]]; then
      write_wrapper "bin/$b" loader "libexec/$b" || problem "cannot write bin/$b"
    elif [[ "$TRAINING_PROGRAMS" == *" $b "* ]]; then
      # shellcheck disable=SC2016  # $root is the wrapper's, expanded when it runs
      write_wrapper "bin/$b" env "libexec/$b" '--data_dir="$root/data/fashion-mnist"' || problem "cannot write bin/$b"
    else
      write_wrapper "bin/$b" env "libexec/$b" || problem "cannot write bin/$b"
    fi
  done
  for s in "${SUITES[@]}"; do runfiles "$s" || problem "cannot rebuild $s's runfiles"; done
  if [[ -r "$FASHION_MNIST/train-images-idx3-ubyte.gz" ]]; then
    cp -rL "$FASHION_MNIST" "$dir/data/fashion-mnist" || problem "cannot copy $FASHION_MNIST"
  else
    problem "no Fashion-MNIST in $FASHION_MNIST (compare trains on it): apt-get install dataset-fashion-mnist"
  fi

  # Debian's network tools.
  if [[ -n "$net" ]]; then
    mkdir -p "$dir/net/sbin" "$dir/net/lib" "$dir/net/xtables" || return 1
    for tool in "${NET_TOOLS[@]}"; do
      if ! t=$(PATH=/usr/sbin:/sbin:/usr/bin:/bin command -v "$tool"); then
        problem "no $tool on this host (apt-get install iproute2 iptables procps)"
        continue
      fi
      cp -L "$t" "$dir/net/sbin/$tool" || problem "cannot copy $t"
      copy_libs "$t" "$dir/net/lib"
    done
    ln -sfn xtables-legacy-multi "$dir/net/sbin/iptables" || return 1
    cp -L /usr/lib/x86_64-linux-gnu/xtables/libxt_*.so "$dir/net/xtables/" || problem "cannot copy the libxt_*.so modules"
    for lib in "$dir"/net/xtables/libxt_NFQUEUE.so "$dir"/net/xtables/libxt_standard.so; do
      [[ -e "$lib" ]] || problem "no $(basename "$lib") among the xtables modules"
      copy_libs "$lib" "$dir/net/lib"
    done
    for tool in ip tc iptables sysctl; do
      write_wrapper "net/bin/$tool" net "net/sbin/$tool" || problem "cannot write net/bin/$tool"
    done
    # tcpdump for the window-round capture, where this host has one: optional, the suites never start it.
    if t=$(PATH=/usr/sbin:/sbin:/usr/bin:/bin command -v tcpdump); then
      cp -L "$t" "$dir/net/sbin/tcpdump" || problem "cannot copy $t"
      copy_libs "$t" "$dir/net/lib"
      write_wrapper net/bin/tcpdump net net/sbin/tcpdump || problem "cannot write net/bin/tcpdump"
    fi
  fi
  mkdir -p "$dir/tools" && cp -f "$root/bench/tools/window_round_capture.py" "$dir/tools/" ||
    problem "cannot copy bench/tools/window_round_capture.py"

  cp -f "${BASH_SOURCE[0]}" "$dir/bench.sh" || problem "cannot copy bench.sh"
  if [[ -n "$slim" ]]; then
    tr ' ' '\n' <<<"$left" | sed '/^$/d' | sort -u >"$dir/host_libs" || return 1
  fi
  {
    echo "psring bench bundle (tools/bench_bundle.sh)"
    echo "commit: $(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(
      [[ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ]] && echo ' + uncommitted changes')"
    echo "built: $(date -u '+%Y-%m-%d %H:%M UTC') on $(sed -n 's/^PRETTY_NAME="\(.*\)"$/\1/p' /etc/os-release), $(ldd --version | head -1)"
    echo "cuBLAS and NCCL: $([[ -n "$slim" ]] && echo "left to the host: $(tr '\n' ' ' <"$dir/host_libs")" || echo carried)"
    echo "network tools: $([[ -n "$net" ]] && echo "carried: ip, tc, iptables (xtables-legacy-multi), sysctl$(
      [[ -e "$dir/net/sbin/tcpdump" ]] && echo ", tcpdump")" || echo "not carried")"
  } >"$dir/BUNDLE_INFO"

  # What the other host will see: every library from the bundle, every program runs from it.
  for b in "${SUITES[@]/#/bench/}" "${PROGRAMS[@]}"; do check_libs "$dir/libexec/$b" "$dir/lib"; done
  for b in "${SUITES[@]/#/bench/}" "${PROGRAMS[@]}"; do
    "$dir/bin/$b" --help >/dev/null 2>&1 || problem "bundled $b --help fails: $("$dir/bin/$b" --help 2>&1 | tail -1)"
  done
  if [[ -n "$net" ]]; then
    for tool in "${NET_TOOLS[@]}" "$dir"/net/xtables/libxt_NFQUEUE.so "$dir"/net/xtables/libxt_standard.so; do
      [[ "$tool" == /* ]] || tool="$dir/net/sbin/$tool"
      check_libs "$tool" "$dir/net/lib"
    done
    "$dir/net/bin/ip" -V >/dev/null 2>&1 || problem "carried ip -V fails"
    "$dir/net/bin/tc" -V >/dev/null 2>&1 || problem "carried tc -V fails"
    "$dir/net/bin/iptables" -V 2>/dev/null | grep -q legacy || problem "carried iptables -V fails"
    "$dir/net/bin/sysctl" -n kernel.ostype >/dev/null 2>&1 || problem "carried sysctl fails"
    if [[ -e "$dir/net/sbin/tcpdump" ]]; then
      check_libs "$dir/net/sbin/tcpdump" "$dir/net/lib"
      "$dir/net/bin/tcpdump" --version >/dev/null 2>&1 || problem "carried tcpdump --version fails"
    fi
  fi
  python3 "$dir/tools/window_round_capture.py" --help >/dev/null 2>&1 || problem "bundled window_round_capture.py --help fails"
  if [[ $bad -ne 0 ]]; then echo "bench_bundle: the bundle in $dir is INCOMPLETE (see above)"; return 1; fi

  archive="$dir.tar.xz"
  XZ_OPT="${XZ_OPT:--T0}" tar -cJf "$archive" -C "$(dirname "$dir")" "$(basename "$dir")" ||
    { echo "bench_bundle: cannot write $archive"; return 1; }
  size=$(stat -c %s "$archive")
  sed 's/^/# /' "$dir/BUNDLE_INFO"
  echo "bundle in $dir ($(du -sh "$dir" | cut -f1)); libraries carried: $(find "$dir/lib" -type f | wc -l) for psring's binaries$(
    [[ -n "$net" ]] && echo ", $(find "$dir/net/lib" -type f | wc -l) for the network tools")"
  awk -v s="$size" -v m="$MAX_ARCHIVE_BYTES" -v a="$archive" \
    'BEGIN { printf "archive %s: %.1f MiB compressed (limit %d MiB)\n", a, s / 1048576, m / 1048576 }'
  if [[ $size -gt $MAX_ARCHIVE_BYTES ]]; then
    if [[ -n "$slim" ]]; then
      echo "FAIL: $archive is over $((MAX_ARCHIVE_BYTES >> 20)) MiB"
      return 1
    fi
    echo "# over $((MAX_ARCHIVE_BYTES >> 20)) MiB with --with-cuda-libs: cuBLAS and NCCL are about 810 MB, and xz hardly shrinks them"
  fi
  echo "on the other host: tar xJf $(basename "$archive") && $(basename "$dir")/bench.sh compare"
}

# ------------------------------------------------------------------------------------------------------------
# The other host: bench.sh SUITE [flags...]
# ------------------------------------------------------------------------------------------------------------

# find_exe NAME: where the suites' FindExecutable (common/subprocess.cc) finds NAME: PATH, then the system's.
find_exe() {
  local d
  local IFS=:
  for d in $PATH /usr/sbin /sbin /usr/bin /bin; do
    [[ -n "$d" && -x "$d/$1" && ! -d "$d/$1" ]] && { echo "$d/$1"; return 0; }
  done
  return 1
}

# runs PATH: whether the tool at PATH starts and answers (-V; sysctl reads a key).
runs() {
  if [[ "$(basename "$1")" == sysctl ]]; then "$1" -n kernel.ostype; else "$1" -V; fi >/dev/null 2>&1
}

# host_net_tools: the paths of the host's ip, tc, iptables and sysctl when all are there and run (exit 0), else
# "a working <the missing ones>" (exit 1).
host_net_tools() {
  local t p found="" missing=""
  for t in ip tc iptables sysctl; do
    if p=$(find_exe "$t") && runs "$p"; then found+="$p "; else missing+="$t "; fi
  done
  if [[ -n "$missing" ]]; then echo "a working ${missing% }"; return 1; fi
  echo "${found% }"
}

choose_net_tools() {
  local want="${PSRING_BUNDLE_NET_TOOLS:-auto}" tools why
  case "$want" in auto | host | carried) ;; *) echo "bench.sh: PSRING_BUNDLE_NET_TOOLS=$want: use host or carried"; exit 2 ;; esac
  tools=$(host_net_tools)
  local host_ok=$?
  if [[ "$want" == host || ("$want" == auto && $host_ok -eq 0) ]]; then
    if [[ $host_ok -eq 0 ]]; then
      echo "# net tools: host's $tools ($(ip_version "$(find_exe ip)"); $("$(find_exe iptables)" -V 2>&1 | head -1))"
    else
      echo "# net tools: host's (PSRING_BUNDLE_NET_TOOLS=host), though this host lacks $tools"
    fi
    return
  fi
  if [[ ! -x "$here/net/bin/ip" ]]; then
    echo "# net tools: this host lacks $tools and the bundle carries none (built --without-net-tools): emulated clusters will fail"
    return
  fi
  why="forced by PSRING_BUNDLE_NET_TOOLS=carried"
  [[ "$want" == auto ]] && why="this host lacks $tools"
  PATH="$here/net/bin:$PATH"
  export PATH
  echo "# net tools: carried (Debian 12): ip, tc, iptables (xtables-legacy-multi), sysctl from $here/net/bin" \
    "($why; $(ip_version "$here/net/bin/ip"); XTABLES_LIBDIR=$here/net/xtables)"
  "$here/net/bin/ip" -V >/dev/null 2>&1 || echo "# WARNING: the carried ip does not run here: $("$here/net/bin/ip" -V 2>&1 | tail -1)"
}
ip_version() { "$1" -V 2>&1 | head -1 | sed 's/, libbpf.*//'; }

# br_netfilter: --latency sends bridged frames through iptables (bench/emulator/cluster.cc).
load_br_netfilter() {
  [[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]] && return
  local modprobe
  if modprobe=$(find_exe modprobe) && "$modprobe" br_netfilter 2>/dev/null; then
    echo "# br_netfilter: loaded ($modprobe br_netfilter)"
  else
    echo "# br_netfilter: not loaded, and $([[ -n "$modprobe" ]] && echo "'$modprobe br_netfilter' failed" ||
      echo "no modprobe here"): runs with --latency > 0 will fail (cluster.cc says so)"
  fi
}

# The libraries DIR/host_libs names (cuBLAS and NCCL, unless built --with-cuda-libs), from this host: their
# folders go to PSRING_BUNDLE_LIBS (what the wrappers give psring's binaries) where the loader would not find
# them itself. Returns 1 when one is nowhere.
find_host_cuda_libs() {
  local want dir found cache ldconfig libs="$here/lib" missing=""
  cache=$(ldconfig=$(find_exe ldconfig) && "$ldconfig" -p 2>/dev/null)
  while read -r want; do
    grep -qF "$want " <<<"$cache" && { echo "# $want: this host's (loader cache)"; continue; }
    found=""
    for dir in ${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH//:/ }} /usr/local/cuda*/lib64 /usr/local/cuda*/targets/x86_64-linux/lib \
      $(python3 -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null </dev/null); do
      found=$(find -H "$dir" -maxdepth 3 -name "$want" 2>/dev/null | head -1)
      [[ -n "$found" ]] && break
    done
    if [[ -n "$found" ]]; then
      echo "# $want: this host's $found"
      [[ ":$libs:" == *":$(dirname "$found"):"* ]] || libs+=":$(dirname "$found")"
    else
      missing+=" $want"
    fi
  done <"$here/host_libs"
  PSRING_BUNDLE_LIBS="$libs"
  export PSRING_BUNDLE_LIBS
  [[ -z "$missing" ]] && return
  echo "bench.sh:$missing: not in the bundle and not found on this host (loader cache, LD_LIBRARY_PATH,"
  echo "  /usr/local/cuda*, python3's nvidia-* wheels): psring's workers link them and cannot start. Install CUDA 13's"
  echo "  cuBLAS and NCCL (or pip's nvidia-cublas and nvidia-nccl for CUDA 13), or build the bundle --with-cuda-libs."
  return 1
}

run_suite() {
  local suite="${1:-}"
  case "$suite" in
    "" | -h | --help | help) usage; exit 0 ;;
  esac
  if [[ " ${SUITES[*]} " != *" $suite "* ]]; then
    echo "bench.sh: unknown suite '$suite'; one of: ${SUITES[*]} (bench.sh --help)"
    exit 2
  fi
  shift
  sed -n '2,3s/^/# /p' "$here/BUNDLE_INFO"
  local cores
  cores=$(nproc 2>/dev/null || echo "?")
  echo "# cores: $cores on this host; a run wants about one per process it starts: N workers (+1 server host for"
  echo "#   ps-1, +N co-located shards for ps-colocated, +K hosts for ps-dedicated) + the delay program; runs the CPU"
  echo "#   bound are marked EMULATOR-BOUND and never fitted or judged (bench.sh --help: 'Cores per emulated host')"
  if [[ "$suite" != crossover_maps && "$suite" != allreduce_bench ]]; then
    [[ $(id -u) -eq 0 ]] || echo "# not root: no network namespaces; the suite falls back to loopback and says so"
    choose_net_tools
    load_br_netfilter
  fi
  # The workers need them; crossover_maps starts none, cluster_run the user's command, --help nothing.
  if [[ -f "$here/host_libs" ]] && ! find_host_cuda_libs && [[ "$suite" != crossover_maps && "$suite" != cluster_run &&
    " $* " != *" --help"* ]]; then
    exit 1
  fi
  exec "$here/bin/bench/$suite" "$@"
}

if [[ -f "$here/BUNDLE_INFO" && -d "$here/libexec" ]]; then
  run_suite "$@"
fi

dir="" slim=1 net=1 left="" interp="" root=""
for arg in "$@"; do
  case "$arg" in
    --without-cuda-libs) slim=1 ;;
    --with-cuda-libs) slim="" ;;
    --without-net-tools) net="" ;;
    --with-net-tools) net=1 ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "bench_bundle: unknown flag $arg"; dir="" ; break ;;
    *)
      if [[ -n "$dir" ]]; then echo "bench_bundle: one DIR only"; dir=""; break; fi
      dir="$arg"
      ;;
  esac
done
if [[ -z "$dir" ]]; then
  echo "usage: $0 DIR [--with-cuda-libs] [--without-net-tools]   (--help: what it carries and checks)"
  exit 2
fi
dir="$(realpath -m "$dir")"
bundle
exit $?
