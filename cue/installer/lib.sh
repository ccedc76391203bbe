# shellcheck shell=sh disable=SC2034 # variables here are read by the scripts that source this file
# lib.sh: helpers shared by the gvisorgen node installer scripts. Sourced, never run:
#   . "${GVISORGEN_SCRIPTS:-/gvisorgen}/lib.sh"
#
# The contract (environment set by the generator on every container that runs these scripts) is documented in
# README.md beside this file; defaults are applied and every value is validated by gvz_load_env below.
#
# Conventions: POSIX sh for busybox, `set -eu` in every script, every host path is "$HOST_ROOT$path", every host
# command goes through "$HOST_EXEC" (word-split on purpose; curl alone through "$HOST_EXEC_NET"), nothing else of the
# host is assumed visible.

GVZ_NAME=${GVZ_NAME:-gvisorgen}

gvz_log() { printf '[%s] %s\n' "$GVZ_NAME" "$*" >&2; }
gvz_die() {
    printf '[%s] ERROR: %s\n' "$GVZ_NAME" "$*" >&2
    exit 1
}

# gvz_need_applets CMD... : fail naming the first command the image lacks.
gvz_need_applets() {
    for _a in "$@"; do
        command -v "$_a" >/dev/null 2>&1 || gvz_die "the installer image has no '$_a' command (busybox applet); use an image that provides it"
    done
}

# Applets every script uses through this file.
GVZ_BASE_APPLETS="awk cat chmod cmp cp cut date find grep head hostname mkdir mktemp mv readlink rm rmdir sed sha512sum sleep sort stat tail timeout tr wc"

gvz_is_uint() { case $1 in '' | *[!0-9]*) return 1 ;; *) return 0 ;; esac; }

# gvz_check_path NAME VALUE : an absolute host path made only of safe characters (it is written into TOML strings):
# letters, digits and . _ - between single slashes, no "." or ".." part, no trailing slash. The values schema
# (#AbsPath in cue/values.cue) holds the same rule; ci/node's contract test feeds both one corpus.
gvz_check_path() {
    case $2 in
    /?*) ;;
    *) gvz_die "$1 must be an absolute path, got '$2'" ;;
    esac
    case $2 in
    *[!A-Za-z0-9._/-]* | *//* | */ | */./* | */. | */../* | */..)
        gvz_die "$1 may hold only letters, digits and . _ - between single slashes (no '.' or '..' part, no trailing /), got '$2'"
        ;;
    esac
}

# gvz_load_env : defaults + validation of the whole contract. Sets GVZ_* derived values.
gvz_load_env() {
    HOST_ROOT=${HOST_ROOT-/host}
    HOST_ROOT=${HOST_ROOT%/}
    HOST_EXEC=${HOST_EXEC:-nsenter -t 1 -m --}
    HOST_EXEC_NET=${HOST_EXEC_NET:-nsenter -t 1 -m -n --}
    HOST_PATH=${HOST_PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}
    GVISOR_VERSION=${GVISOR_VERSION:-}
    GVISOR_BASE_URL=${GVISOR_BASE_URL:-https://storage.googleapis.com/gvisor/releases/release}
    GVISOR_BASE_URL=${GVISOR_BASE_URL%/}
    GVISOR_LAYOUT=${GVISOR_LAYOUT:-auto}
    GVISOR_SHA512_PINS=${GVISOR_SHA512_PINS:-}
    GVISOR_CA_BUNDLE=${GVISOR_CA_BUNDLE:-}
    CONTAINERD_MIN_VERSION=${CONTAINERD_MIN_VERSION:-}
    GVISOR_MODE=${GVISOR_MODE:-install}
    INSTALL_DIR=${INSTALL_DIR:-/usr/local/bin}
    INSTALL_DIR=${INSTALL_DIR%/}
    INSTALL_DIR_ON_PATH=${INSTALL_DIR_ON_PATH:-true}
    CONTAINERD_CONFIG=${CONTAINERD_CONFIG:-/etc/containerd/config.toml}
    CONTAINERD_CONFIG_MODE=${CONTAINERD_CONFIG_MODE:-auto}
    CONTAINERD_SERVICE=${CONTAINERD_SERVICE:-containerd}
    RUNSC_CONFIG=${RUNSC_CONFIG:-/etc/containerd/runsc/runsc.toml}
    RUNSC_CONFIG_TOML=${RUNSC_CONFIG_TOML:-}
    RUNSC_CLASSES=${RUNSC_CLASSES:-}
    RUNSC_CHECKS=${RUNSC_CHECKS:-}
    NVIDIA_DRIVER_VERSION_FILE=${NVIDIA_DRIVER_VERSION_FILE:-/proc/driver/nvidia/version}
    KVM_DEVICE=${KVM_DEVICE:-/dev/kvm}
    NODE_NAME=${NODE_NAME:-}
    ADOPT_FOREIGN_RUNSC=${ADOPT_FOREIGN_RUNSC:-false}
    STATE_DIR=${STATE_DIR:-/run/gvisorgen}
    STATE_DIR=${STATE_DIR%/}
    DOWNLOAD_TIMEOUT_SECONDS=${DOWNLOAD_TIMEOUT_SECONDS:-60}
    DOWNLOAD_RETRIES=${DOWNLOAD_RETRIES:-3}
    RESTART_TIMEOUT_SECONDS=${RESTART_TIMEOUT_SECONDS:-60}
    LOCK_TIMEOUT_SECONDS=${LOCK_TIMEOUT_SECONDS:-300}
    KEEP_OLD_RELEASES=${KEEP_OLD_RELEASES:-3}

    case $HOST_ROOT in '' | /*) ;; *) gvz_die "HOST_ROOT must be an absolute path, got '$HOST_ROOT'" ;; esac
    case $GVISOR_MODE in install | uninstall) ;; *) gvz_die "GVISOR_MODE must be install or uninstall, got '$GVISOR_MODE'" ;; esac
    case $CONTAINERD_CONFIG_MODE in auto | dropin | block) ;; *) gvz_die "CONTAINERD_CONFIG_MODE must be auto, dropin or block, got '$CONTAINERD_CONFIG_MODE'" ;; esac
    case $CONTAINERD_SERVICE in *[!A-Za-z0-9@._\ -]* | *[!\ ]*\ \ * | \ * | *\ ) gvz_die "CONTAINERD_SERVICE must be systemd unit names (letters, digits and @ . _ -) separated by single spaces, got '$CONTAINERD_SERVICE'" ;; esac
    case $INSTALL_DIR_ON_PATH in true | false) ;; *) gvz_die "INSTALL_DIR_ON_PATH must be true or false, got '$INSTALL_DIR_ON_PATH'" ;; esac
    case $ADOPT_FOREIGN_RUNSC in true | false) ;; *) gvz_die "ADOPT_FOREIGN_RUNSC must be true or false, got '$ADOPT_FOREIGN_RUNSC'" ;; esac
    gvz_check_path INSTALL_DIR "$INSTALL_DIR"
    gvz_check_path CONTAINERD_CONFIG "$CONTAINERD_CONFIG"
    gvz_check_path RUNSC_CONFIG "$RUNSC_CONFIG"
    gvz_check_path NVIDIA_DRIVER_VERSION_FILE "$NVIDIA_DRIVER_VERSION_FILE"
    gvz_check_path KVM_DEVICE "$KVM_DEVICE"
    gvz_check_path STATE_DIR "$STATE_DIR"
    # A Node's name is a DNS subdomain (lowercase letters, digits, '-' and '.', at most 253 characters).
    if [ -n "$NODE_NAME" ] && ! printf '%s' "$NODE_NAME" | grep -qxE '[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?'; then
        gvz_die "NODE_NAME must be a Node's name (a DNS subdomain), got '$NODE_NAME'"
    fi
    if ! gvz_is_uint "$KEEP_OLD_RELEASES" || [ "$KEEP_OLD_RELEASES" -gt 20 ]; then
        gvz_die "KEEP_OLD_RELEASES must be an integer from 0 to 20, got '$KEEP_OLD_RELEASES'"
    fi
    for _v in DOWNLOAD_TIMEOUT_SECONDS DOWNLOAD_RETRIES RESTART_TIMEOUT_SECONDS LOCK_TIMEOUT_SECONDS; do
        eval "_x=\$$_v"
        # shellcheck disable=SC2154 # _x is set by the eval above
        if ! gvz_is_uint "$_x" || [ "$_x" -eq 0 ]; then gvz_die "$_v must be a positive integer, got '$_x'"; fi
    done
    # The first word of HOST_EXEC and HOST_EXEC_NET must exist in the image (nsenter by default).
    # shellcheck disable=SC2086 # GVZ_HX (HOST_EXEC + env PATH=HOST_PATH) is a command prefix, split on purpose
    set -- $HOST_EXEC
    [ $# -gt 0 ] || gvz_die "HOST_EXEC is empty"
    gvz_need_applets "$1"
    # shellcheck disable=SC2086 # a command prefix, split on purpose
    set -- $HOST_EXEC_NET
    [ $# -gt 0 ] || gvz_die "HOST_EXEC_NET is empty"
    gvz_need_applets "$1"
    # A CA bundle is PEM text: refuse anything else early rather than let the host's curl misread it.
    if [ -n "$GVISOR_CA_BUNDLE" ]; then
        case $GVISOR_CA_BUNDLE in
        *"-----BEGIN CERTIFICATE-----"*"-----END CERTIFICATE-----"*) ;;
        *) gvz_die "GVISOR_CA_BUNDLE must be PEM certificates (-----BEGIN CERTIFICATE----- ... -----END CERTIFICATE-----)" ;;
        esac
    fi
    if [ -n "$CONTAINERD_MIN_VERSION" ] && ! printf '%s' "$CONTAINERD_MIN_VERSION" | grep -qE '^[0-9]{1,4}\.[0-9]{1,4}(\.[0-9]{1,4})?$'; then
        gvz_die "CONTAINERD_MIN_VERSION must be MAJOR.MINOR or MAJOR.MINOR.PATCH (or empty), got '$CONTAINERD_MIN_VERSION'"
    fi
    case $HOST_PATH in *[!A-Za-z0-9._/:-]*) gvz_die "HOST_PATH may hold only letters, digits and . _ / : -, got '$HOST_PATH'" ;; esac
    # Host commands run with the host's usual PATH, not the image's (nsenter passes our environment through).
    # GVZ_HX (PID 1's mount namespace) serves every host command but curl: host files and unix sockets by path
    # (containerd's, systemd's) need only the mount namespace. GVZ_HXN adds the network namespace, for curl alone.
    GVZ_HX="$HOST_EXEC env PATH=$HOST_PATH"
    GVZ_HXN="$HOST_EXEC_NET env PATH=$HOST_PATH"

    GVZ_STAMP=$INSTALL_DIR/.gvisorgen-runsc.stamp
    # Each release in its own folder (runsc, the shim, gvisor-bin/), and its own runsc state root (runsc.toml's root;
    # the shim adds /<containerd namespace>): a sandbox keeps the runsc that created it, and that runsc alone knows it.
    GVZ_RELEASES_NAME=gvisor-releases
    GVZ_RELEASES=$INSTALL_DIR/$GVZ_RELEASES_NAME
    GVZ_RUNSC_ROOTS=$STATE_DIR/runsc
    # The runsc runsc.toml names: it runs each call with the release whose state root holds the container (a new
    # container in a sandbox started before a bump included). Written from the script of that name (.sh) in
    # GVISORGEN_SCRIPTS; a file in INSTALL_DIR, not in a release's folder: every release is reached through it.
    GVZ_DISPATCH_NAME=gvisorgen-runsc
    GVZ_DISPATCH=$INSTALL_DIR/$GVZ_DISPATCH_NAME
    # The state root of the shim's default, which an unversioned install (gvisorgen before versioned releases) used.
    GVZ_LEGACY_ROOT=/run/containerd/runsc
    GVZ_APPLIED=$CONTAINERD_CONFIG.gvisorgen-applied
    GVZ_BACKUP=$CONTAINERD_CONFIG.gvisorgen-backup
    # Left in runsc.toml's folder when gvisorgen created that folder: uninstall removes a folder only if it is there.
    GVZ_DIR_MARK=.gvisorgen-created
    # The digest of the config containerd was last restarted for (under /run: a reboot forgets it).
    GVZ_RESTARTED_FOR=$STATE_DIR/restarted-for
    GVZ_CHECK=$CONTAINERD_CONFIG.gvisorgen-check
    # The drop-in's candidate while containerd validates it: beside the config, out of every imports pattern's reach
    # (gvz_check_imports), so that a run killed meanwhile leaves nothing containerd would load.
    GVZ_DROPIN_STAGED=$CONTAINERD_CONFIG.gvisorgen-dropin
    GVZ_CFG_DIR=${CONTAINERD_CONFIG%/*}
    [ -n "$GVZ_CFG_DIR" ] || GVZ_CFG_DIR=/
}

# gvz_check_version : GVISOR_VERSION is YYYYMMDD or YYYYMMDD.N, a calendar date of this century ("latest" and anything
# else refused). The values schema (#ReleaseTag in cue/values.cue) holds the same rule; ci/node's contract test feeds both
# one corpus.
gvz_check_version() {
    case $GVISOR_VERSION in
    20[0-9][0-9][01][0-9][0-3][0-9]) ;;
    20[0-9][0-9][01][0-9][0-3][0-9].[0-9]*)
        gvz_is_uint "${GVISOR_VERSION#*.}" || gvz_die "GVISOR_VERSION must be YYYYMMDD or YYYYMMDD.N, got '$GVISOR_VERSION'"
        ;;
    *) gvz_die "GVISOR_VERSION must be a release tag YYYYMMDD or YYYYMMDD.N (not 'latest'), got '$GVISOR_VERSION'" ;;
    esac
    # A calendar date: busybox's date normalises 20230229 to 20230301 (and refuses 20241399).
    _gvz_d=${GVISOR_VERSION%%.*}
    [ "$(date -u -D %Y%m%d -d "$_gvz_d" +%Y%m%d 2>/dev/null)" = "$_gvz_d" ] ||
        gvz_die "GVISOR_VERSION $GVISOR_VERSION is not a release tag: $_gvz_d is not a calendar date"
}

# gvz_check_runsc_toml : RUNSC_CONFIG_TOML holds `key = value` lines for [runsc_config] only. The values schema
# (gvisor.runsc.config) renders only such lines; ci/node's contract test checks what it renders passes here.
gvz_check_runsc_toml() {
    if printf '%s\n' "$RUNSC_CONFIG_TOML" | grep -q '^[[:space:]]*\['; then
        gvz_die "RUNSC_CONFIG_TOML must hold 'key = value' lines for [runsc_config] only, no table headers"
    fi
}

# gvz_layout : prints binaries|archive for GVISOR_LAYOUT and the tag's date.
gvz_layout() {
    case $GVISOR_LAYOUT in
    binaries | archive) echo "$GVISOR_LAYOUT" ;;
    # the day of #ArchiveSince (cue/values.cue): ci/node's TestLayoutAgrees holds the two equal
    auto) if [ "$(printf '%s' "$GVISOR_VERSION" | cut -c1-8)" -lt 20260721 ]; then echo binaries; else echo archive; fi ;;
    *) gvz_die "GVISOR_LAYOUT must be auto, binaries or archive, got '$GVISOR_LAYOUT'" ;;
    esac
}

# gvz_arch : gVisor's name for this node's architecture.
gvz_arch() {
    _m=$(uname -m)
    case $_m in
    x86_64 | amd64) echo x86_64 ;;
    aarch64 | arm64) echo aarch64 ;;
    *) gvz_die "unsupported architecture '$_m' (uname -m): gVisor releases exist for x86_64 and aarch64 only" ;;
    esac
}

# gvz_check_pins : every non-blank, non-comment line of GVISOR_SHA512_PINS is "<arch>/<artifact> <128 hex>". Sets
# GVZ_PINS, the pins gvz_pin reads: one "<arch>/<artifact> <sha512, lower case>" line each, the first of a key winning.
gvz_check_pins() {
    GVZ_PINS=$(printf '%s\n' "$GVISOR_SHA512_PINS" | awk '
        /^[ \t]*(#.*)?$/ { next }
        {
            ok = (NF == 2 && $1 ~ /^(x86_64|aarch64)\/(runsc|containerd-shim-runsc-v1|gvisor\.tar\.bz2)$/ && length($2) == 128 && $2 ~ /^[0-9a-fA-F]+$/)
            if (!ok) { print "bad GVISOR_SHA512_PINS line: " $0 > "/dev/stderr"; bad = 1 }
            else if (!seen[$1]++) print $1, tolower($2)
        }
        END { exit bad }') || gvz_die "GVISOR_SHA512_PINS lines must be '<x86_64|aarch64>/<runsc|containerd-shim-runsc-v1|gvisor.tar.bz2> <128 hex digits>'"
}

# gvz_pin ARCH ARTIFACT : the pinned sha512 (lower case) or nothing, from GVZ_PINS (gvz_check_pins, which every script
# that reads a pin runs first). Shell only: install-runsc asks for pins a dozen times a run.
gvz_pin() {
    _gvz_ifs=$IFS
    IFS='
'
    for _gvz_l in $GVZ_PINS; do
        case $_gvz_l in "$1/$2 "*)
            IFS=$_gvz_ifs
            echo "${_gvz_l#"$1/$2 "}"
            return 0
            ;;
        esac
    done
    IFS=$_gvz_ifs
}

# (one process: the digest cut from sha512sum's line by the shell, not a pipeline into cut; empty when it fails)
gvz_sha512() {
    _gvz_h=$(sha512sum "$1") || true
    echo "${_gvz_h%% *}"
}

# gvz_current_files STAMP VERSION : "<sha512> <path>" of each file the stamp records for the node's install of VERSION:
# the release's own, and the shim and gvisorgen-runsc in INSTALL_DIR (what ready.sh checks and gvz_seen records).
gvz_current_files() {
    awk -v d="$GVZ_RELEASES_NAME/$2/" -v r="$GVZ_DISPATCH_NAME" '$1 == "file" && (index($3, d) == 1 || $3 == "containerd-shim-runsc-v1" || $3 == r) { print $2, $3 }' "$1"
}

# gvz_seen DIR PATH... : one line per PATH (relative to DIR), "seen <PATH> <device> <inode> <size> <mtime> <ctime>",
# each time as the kernel keeps it (nanoseconds, to its clock tick; busybox stat's %y/%z: three words each): what the
# host's filesystem says of the file's bytes. install-runsc records these lines in the stamp just before it hashes the
# installed files; ready.sh hashes a file again only when its line differs (any write, truncation, chmod, link, rename
# or replacement changes its ctime or inode, which only root setting the clock back could forge, and root can rewrite
# the stamp's digests as well).
gvz_seen() {
    (cd "$1" && shift && stat -c 'seen %n %d %i %s %y %z' -- "$@")
}

# gvz_seen_unchanged STAMP : reads gvz_seen lines on stdin; prints the PATH of each that is one of STAMP's own (a file
# stat could not read prints no line, so it is never among them: the caller hashes it).
gvz_seen_unchanged() {
    awk 'NR == FNR { if ($1 == "seen") s[$0] = 1; next } ($0 in s) { print $2 }' "$1" -
}

gvz_is_sha512() {
    [ "${#1}" -eq 128 ] || return 1
    case $1 in *[!0-9a-f]*) return 1 ;; esac
}

# ---------------------------------------------------------------------------------------------------------------
# Host commands

# gvz_host CMD... : run a command on the host (through HOST_EXEC). Host paths are the host's real paths.
gvz_host() {
    # shellcheck disable=SC2086 # GVZ_HX is a command prefix, split on purpose
    $GVZ_HX "$@"
}

# gvz_check_host : HOST_EXEC works and the host has containerd; logs the host containerd's version.
gvz_check_host() {
    # shellcheck disable=SC2086 # GVZ_HX (HOST_EXEC + env PATH=HOST_PATH) is a command prefix, split on purpose
    _v=$(timeout 30 $GVZ_HX containerd --version 2>&1) ||
        gvz_die "cannot run 'containerd --version' on the host through HOST_EXEC ($HOST_EXEC): $(printf '%s' "$_v" | head -c 300)"
    gvz_log "host: $_v"
}

# gvz_containerd_semver "OUTPUT" : MAJOR.MINOR.PATCH of `containerd --version`'s first line, from its first field after
# the name that starts with a version: "containerd github.com/containerd/containerd v1.6.20 <commit>", "containerd
# containerd.io 1.7.27 <commit>", Debian's "… 1.6.20~ds1 1.6.20~ds1-1+deb12u3", "… /v2 2.4.2+unknown". Nothing if none.
gvz_containerd_semver() {
    printf '%s\n' "$1" | head -n 1 | awk '{
        for (i = 2; i <= NF; i++) {
            v = $i; sub(/^v/, "", v)
            if (match(v, /^[0-9]+\.[0-9]+(\.[0-9]+)?/)) {
                v = substr(v, 1, RLENGTH); if (split(v, p, ".") == 2) v = v ".0"; print v; exit
            }
        }
    }'
}

# gvz_version_lt A B : A < B for MAJOR.MINOR[.PATCH] versions, compared numerically (vet's VersionLess does the same).
gvz_version_lt() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        split(a, x, "."); split(b, y, ".")
        for (i = 1; i <= 3; i++) { if (x[i] + 0 < y[i] + 0) exit 0; if (x[i] + 0 > y[i] + 0) exit 1 }
        exit 1
    }'
}

# gvz_check_containerd_floor : the host's containerd can start this release's shim (CONTAINERD_MIN_VERSION, rendered
# from the CUE fact #ShimNeedsContainerd for GVISOR_VERSION; empty: any can). Dies naming both versions and the way out.
gvz_check_containerd_floor() {
    [ -n "$CONTAINERD_MIN_VERSION" ] || return 0
    # shellcheck disable=SC2086 # GVZ_HX (HOST_EXEC + env PATH=HOST_PATH) is a command prefix, split on purpose
    _gvz_cv=$(timeout 30 $GVZ_HX containerd --version 2>&1) ||
        gvz_die "gVisor $GVISOR_VERSION's shim needs containerd >= $CONTAINERD_MIN_VERSION, and 'containerd --version' failed on the host through HOST_EXEC ($HOST_EXEC): $(printf '%s' "$_gvz_cv" | head -c 300)"
    _gvz_have=$(gvz_containerd_semver "$_gvz_cv")
    [ -n "$_gvz_have" ] ||
        gvz_die "gVisor $GVISOR_VERSION's shim needs containerd >= $CONTAINERD_MIN_VERSION, and the host's 'containerd --version' names no version ($(printf '%s' "$_gvz_cv" | head -n 1 | head -c 200)): refusing to install"
    if gvz_version_lt "$_gvz_have" "$CONTAINERD_MIN_VERSION"; then
        gvz_die "refusing to install gVisor $GVISOR_VERSION: its shim needs containerd >= $CONTAINERD_MIN_VERSION (it answers containerd 2's bootstrap handshake, which older containerd cannot read: every gVisor pod would fail to start), and this node runs containerd $_gvz_have ($(printf '%s' "$_gvz_cv" | head -n 1 | head -c 200)); nothing was installed and containerd was not restarted. Either upgrade containerd on this node to >= $CONTAINERD_MIN_VERSION, or pin gvisor.version to a release whose shim containerd $_gvz_have can start (docs/troubleshooting.md)"
    fi
    gvz_log "host containerd $_gvz_have >= $CONTAINERD_MIN_VERSION, the oldest that can start gVisor $GVISOR_VERSION's shim"
}

# gvz_dump CONFIG_HOST_PATH OUT ERR : the host containerd's dump of a config file; status of the dump.
gvz_dump() {
    rm -f "$2.facts"
    # shellcheck disable=SC2086 # GVZ_HX (HOST_EXEC + env PATH=HOST_PATH) is a command prefix, split on purpose
    timeout 60 $GVZ_HX containerd --config "$1" config dump >"$2" 2>"$3" || return
    gvz_dump_facts "$2" >"$2.facts"
}

# GVZ_ASK_SECONDS: how long one question to the running containerd (`ctr plugins ls`) may take before the answer
# counts as none. A containerd that is up but slow (a loaded node: kubelet starting pods, image pulls) answers within
# seconds of CPU, which a saturated node stretches: 5 s refused healthy nodes as "containerd does not answer" (seen
# on a 2-core machine at a load of 24, 2026-12-07). A containerd that is down answers at once (no socket: ctr gives
# up after its own 10 s dial timeout; a dead socket refuses the connection), so the longer bound only delays the
# verdict on a hung one.
GVZ_ASK_SECONDS=20

# gvz_cri_ok ADDRESS [SECONDS] : containerd answers on ADDRESS and its CRI plugin is loaded ("ok" in `ctr plugins
# ls`), asked with a bound of SECONDS (GVZ_ASK_SECONDS when not given).
gvz_cri_ok() {
    # shellcheck disable=SC2086 # GVZ_HX (HOST_EXEC + env PATH=HOST_PATH) is a command prefix, split on purpose
    _out=$(timeout "${2:-$GVZ_ASK_SECONDS}" $GVZ_HX ctr --address "$1" plugins ls 2>/dev/null) || return 1
    printf '%s\n' "$_out" | awk '$1 == "io.containerd.grpc.v1" && $2 == "cri" { f = 1; ok = ($NF == "ok") } END { exit !(f && ok) }'
}

# gvz_cri_lists_runsc ADDRESS [HANDLER...] : what the running containerd's CRI (the API kubelet uses) says of the runsc
# handler (or of each HANDLER: "yes" only when it lists them all),
# asked with the host's crictl: "yes" (its `crictl info` lists a runsc runtime: the config's runtimes table on 1.x and
# 2.x, runtimeHandlers on 2.x), "no", or "unknown: <why>" (no crictl on the host, or crictl could not ask). Kind,
# GKE and EKS nodes ship crictl; without it the dump of the config containerd serves CRI with stands in.
gvz_cri_lists_runsc() {
    # shellcheck disable=SC2086 # GVZ_HX (HOST_EXEC + env PATH=HOST_PATH) is a command prefix, split on purpose
    if ! timeout 5 $GVZ_HX crictl --version >/dev/null 2>&1; then
        echo "unknown: the host has no crictl on $HOST_PATH"
        return 0
    fi
    # shellcheck disable=SC2086 # GVZ_HX (HOST_EXEC + env PATH=HOST_PATH) is a command prefix, split on purpose
    if ! _out=$(timeout 20 $GVZ_HX crictl --runtime-endpoint "unix://$1" --timeout 10s info 2>/dev/null); then
        echo "unknown: crictl info on $1 failed"
        return 0
    fi
    # A JSON key "runsc" (a runtimes table entry) or a handler named runsc; nothing else in `crictl info` is so named.
    # (A handler's name is letters, digits and -: no regex metacharacter.)
    shift
    [ $# -gt 0 ] || set -- runsc
    for _h in "$@"; do
        if ! printf '%s\n' "$_out" | grep -qE "\"$_h\"[[:space:]]*:[[:space:]]*\\{|\"name\"[[:space:]]*:[[:space:]]*\"$_h\""; then
            echo no
            return 0
        fi
    done
    echo yes
}

# gvz_cri_state ADDRESS : what the running containerd says about its CRI plugin, asked through `ctr plugins ls` (never
# read from a config file): prints "ok", "down" (no answer on ADDRESS), "absent" (containerd runs without a CRI
# plugin: disabled), or "<status> <error message>" (the plugin did not load, e.g. "error failed to create CRI ...").
gvz_cri_state() {
    # shellcheck disable=SC2086 # GVZ_HX (HOST_EXEC + env PATH=HOST_PATH) is a command prefix, split on purpose
    if ! _out=$(timeout "$GVZ_ASK_SECONDS" $GVZ_HX ctr --address "$1" plugins ls 2>/dev/null); then
        echo down
        return 0
    fi
    _st=$(printf '%s\n' "$_out" | awk '$1 == "io.containerd.grpc.v1" && $2 == "cri" { print $NF; exit }')
    case $_st in
    ok) echo ok ;;
    '') echo absent ;;
    *)
        # shellcheck disable=SC2086 # GVZ_HX (HOST_EXEC + env PATH=HOST_PATH) is a command prefix, split on purpose
        _msg=$(timeout "$GVZ_ASK_SECONDS" $GVZ_HX ctr --address "$1" plugins ls -d id==cri 2>/dev/null |
            awk '/^[ \t]*Message:/ { sub(/^[ \t]*Message:[ \t]*/, ""); print; exit }' | cut -c1-400) || true
        echo "$_st ${_msg:-(containerd gives no error message)}"
        ;;
    esac
}

# gvz_require_cri ADDRESS CONFIG_DUMP_STATUS DUMP_ERR_FILE DUMP_FILE : refuse (exit 1, nothing written, no restart) unless
# the running containerd serves CRI on ADDRESS. A restart can only make such a node worse: the restarted containerd
# would not serve CRI either, so the wait for it would fail and roll back with a second restart. The message names
# the cause (containerd down, CRI disabled, CRI failed to load, the config on disk rejected) and the fix.
# CONFIG_DUMP_STATUS is "ok", "rejected" or "missing" for the config on disk; DUMP_FILE is its dump when "ok".
gvz_require_cri() {
    _cs=$(gvz_cri_state "$1")
    [ "$_cs" != ok ] || return 0
    # The state of the node first (cause, then what is on disk), one "Fix:" last; what the disk needs comes first in it.
    _disk=
    _pre=
    case $2 in
    rejected)
        _disk=" The config on disk is already broken: the host's containerd rejects $CONTAINERD_CONFIG ($(grep -iE 'level=(error|fatal)|failed|error' "$3" | head -n 1 | cut -c1-300))."
        _pre="correct $CONTAINERD_CONFIG (the rejection above), then "
        ;;
    missing) _disk=" There is no $CONTAINERD_CONFIG; containerd runs on its built-in defaults." ;;
    esac
    if [ -f "$CFG" ] && grep -qxF "$GVZ_BEGIN" "$CFG" 2>/dev/null; then
        _disk="$_disk $CONTAINERD_CONFIG holds gvisorgen's block from an earlier run."
        _pre="${_pre}if the block is at fault remove it (the lines between the gvisorgen markers), then "
    fi
    case $_cs in
    down)
        gvz_die "containerd does not answer on $1, so its CRI (what kubelet uses) cannot be checked; nothing was changed and containerd was not restarted.$_disk Fix: ${_pre}start containerd on the host (systemctl status containerd; journalctl -u containerd) and let the installer retry"
        ;;
    absent)
        _dis=
        if cat "$4" "$CFG" 2>/dev/null | grep -E '^[ \t]*disabled_plugins[ \t]*=' | grep -qE "[\"']((io\.containerd\.grpc\.v1\.)?cri)[\"']"; then
            _dis=" because $CONTAINERD_CONFIG disables it (disabled_plugins lists \"cri\"; Docker's containerd package ships this, as on a Docker/cri-dockerd node)"
        fi
        gvz_die "containerd on $1 runs without its CRI plugin${_dis}: this containerd is not the runtime kubelet uses here (this installer's pod was started by another one), so a runsc runtime in it would never be used; nothing was changed and containerd was not restarted.$_disk Fix: keep the runsc-installer off this node (node affinity), point CONTAINERD_CONFIG at the containerd kubelet uses, or, if kubelet is meant to use this containerd, ${_pre}enable CRI (remove cri from disabled_plugins), restart containerd and let the installer retry"
        ;;
    *)
        gvz_die "containerd on $1 runs, but its CRI plugin failed to load (status ${_cs%% *}: ${_cs#* }); this is the node's state before gvisorgen changed anything, and a restart alone would not change it; nothing was changed and containerd was not restarted.$_disk Fix: ${_pre}correct the cause in $CONTAINERD_CONFIG (or the file it names), restart containerd, and let the installer retry"
        ;;
    esac
}

# gvz_wait_cri ADDRESS SECONDS : bounded wait for gvz_cri_ok. Each question is bounded by what is left of SECONDS too
# (RESTART_TIMEOUT_SECONDS may be 5, below GVZ_ASK_SECONDS): the wait ends within its bound.
gvz_wait_cri() {
    _end=$(($(date +%s) + $2))
    _left=$2
    while :; do
        [ "$_left" -le "$GVZ_ASK_SECONDS" ] || _left=$GVZ_ASK_SECONDS
        gvz_cri_ok "$1" "$_left" && return 0
        _left=$((_end - $(date +%s)))
        [ "$_left" -gt 0 ] || return 1
        sleep 0.5
    done
}

# gvz_service : the unit that runs containerd: the first of CONTAINERD_SERVICE that systemd reports active (k3s runs
# as k3s on servers and k3s-agent on agents, RKE2 as rke2-server or rke2-agent), else the first named.
gvz_service() {
    for _gvz_u in $CONTAINERD_SERVICE; do
        # shellcheck disable=SC2086 # GVZ_HX (HOST_EXEC + env PATH=HOST_PATH) is a command prefix, split on purpose
        if [ "${CONTAINERD_SERVICE#* }" = "$CONTAINERD_SERVICE" ] || timeout 10 $GVZ_HX systemctl is-active --quiet "$_gvz_u" >/dev/null 2>&1; then
            echo "$_gvz_u"
            return 0
        fi
    done
    echo "${CONTAINERD_SERVICE%% *}"
}

# gvz_restart_containerd ADDRESS : systemctl restart of containerd's unit through HOST_EXEC, then wait for CRI. Status
# only. On k3s and RKE2 the unit is the distribution's, and its restart restarts the kubelet too (this pod's containers
# keep running: the runtime's shims outlive it).
gvz_restart_containerd() {
    _gvz_svc=$(gvz_service)
    gvz_log "restarting containerd (systemctl restart $_gvz_svc on the host)"
    # shellcheck disable=SC2086 # GVZ_HX (HOST_EXEC + env PATH=HOST_PATH) is a command prefix, split on purpose
    if ! timeout "$RESTART_TIMEOUT_SECONDS" $GVZ_HX systemctl restart "$_gvz_svc" >&2; then
        gvz_log "systemctl restart $_gvz_svc failed or timed out after ${RESTART_TIMEOUT_SECONDS}s"
        return 1
    fi
    if ! gvz_wait_cri "$1" "$RESTART_TIMEOUT_SECONDS"; then
        gvz_log "containerd did not answer with its CRI plugin loaded on $1 within ${RESTART_TIMEOUT_SECONDS}s"
        return 1
    fi
    gvz_log "containerd is back and its CRI plugin is loaded"
}

# ---------------------------------------------------------------------------------------------------------------
# Reading containerd configs and dumps (awk; TOML headers normalised to double quotes)

# GVZ_AWK_TOML: awk functions that read containerd's TOML the way every reader here does, the one spelling of each
# rule (prepended to the programs that use them, as GVZ_AWK_GLOB is):
#   toml_header(LINE)   a table header line's name: brackets and the blanks around them off, single quotes made double
#                       ('x' -> "x", so that both spellings of a quoted key compare equal);
#   toml_version(LINE)  1 when LINE is a `version = N` line; sets toml_v to N (blanks and a trailing comment off);
#   toml_kv(LINE)       1 when LINE is `key = value`; sets toml_k (blanks off) and toml_v (blanks and one pair of outer
#                       quotes off);
#   toml_cri(V)         the CRI plugin's containerd table in a config or dump of version V (1, 2, 3 and up).
GVZ_AWK_TOML='
function toml_header(h) { sub(/^[ \t]*\[+[ \t]*/, "", h); sub(/[ \t]*\]+[ \t]*$/, "", h); gsub(/\047/, "\"", h); return h }
function toml_version(line) {
    if (line !~ /^[ \t]*version[ \t]*=/) return 0
    toml_v = line; sub(/^[^=]*=[ \t]*/, "", toml_v); sub(/[ \t]*(#.*)?\r?$/, "", toml_v)
    return 1
}
function toml_kv(line,    n) {
    sub(/^[ \t]+/, "", line)
    n = index(line, "=")
    if (n == 0) return 0
    toml_k = substr(line, 1, n - 1); sub(/[ \t]+$/, "", toml_k)
    toml_v = substr(line, n + 1); sub(/^[ \t]+/, "", toml_v); sub(/[ \t]+$/, "", toml_v); gsub(/^["\047]|["\047]$/, "", toml_v)
    return 1
}
function toml_cri(v) {
    if (v !~ /^[+-]?[0-9]+$/) return "plugins.\"io.containerd.grpc.v1.cri\".containerd"
    if (v + 0 >= 3) return "plugins.\"io.containerd.cri.v1.runtime\".containerd"
    if (v + 0 <= 1) return "plugins.cri.containerd"
    return "plugins.\"io.containerd.grpc.v1.cri\".containerd"
}'

# gvz_file_version FILE : the top-level `version = N` of a config (before any table), 1 when absent.
gvz_file_version() {
    awk "$GVZ_AWK_TOML"'
        /^[ \t]*\[/ { exit }
        toml_version($0) { print toml_v; found = 1; exit }
        END { if (!found) print 1 }' "$1"
}

# gvz_runtimes_prefix VERSION : the table that holds CRI runtimes for a config of that version (toml_cri).
gvz_runtimes_prefix() {
    awk -v v="$1" "$GVZ_AWK_TOML"' BEGIN { print toml_cri(v) ".runtimes" }'
}

# gvz_dump_headers DUMP : every table header, normalised ('x' -> "x").
gvz_dump_headers() {
    awk "$GVZ_AWK_TOML"' /^[ \t]*\[/ { print toml_header($0) }' "$1"
}

# gvz_dump_key DUMP TABLE KEY : a key's value (quotes stripped) inside one table of a dump.
gvz_dump_key() {
    awk -v t="$2" -v k="$3" "$GVZ_AWK_TOML"'
        /^[ \t]*\[/ { cur = toml_header($0); next }
        cur == t && toml_kv($0) && toml_k == k { print toml_v; exit }' "$1"
}

# gvz_dump_has_runtime DUMP PREFIX NAME : does the dump define PREFIX.runtimes.NAME?
gvz_dump_has_runtime() {
    gvz_dump_headers "$1" | grep -qxF -e "$2.runtimes.$3" -e "$2.runtimes.\"$3\""
}

# gvz_dump_facts DUMP : what the installer asks of a dump, read in one pass (gvz_dump writes it beside the dump as
# DUMP.facts; the accessors below read it without starting a process):
#   version V     the dump's version line (toml_version): containerd 1.x dumps version 2, 2.x dumps 3 or more;
#   prefix P      the effective CRI containerd table (toml_cri of V);
#   default NAME  P's default_runtime_name (toml_kv's value; empty when unset);
#   addr A        the socket containerd listens on: [grpc] address (1.x), else the server.v1.grpc plugin's (2.x), else
#                 /run/containerd/containerd.sock;
#   runtime NAME  for each P.runtimes.NAME or P.runtimes."NAME" table (a subtable is not a runtime).
gvz_dump_facts() {
    awk "$GVZ_AWK_TOML"'
        /^[ \t]*\[/ { cur = toml_header($0); intable = 1; hdr[++nh] = cur; next }
        !intable && !vdone && toml_version($0) { version = toml_v; vdone = 1 }
        toml_kv($0) {
            if (toml_k == "default_runtime_name") tk = "d\t" cur
            else if (toml_k == "address") tk = "a\t" cur
            else next
            if (!(tk in val)) val[tk] = toml_v
        }
        END {
            if (!vdone) version = 1
            p = toml_cri(version)
            a = val["a\tgrpc"]
            if (a == "") a = val["a\tplugins.\"io.containerd.server.v1.grpc\""]
            if (a == "") a = "/run/containerd/containerd.sock"
            print "version " version; print "prefix " p; print "default " val["d\t" p]; print "addr " a
            r = p ".runtimes."
            for (i = 1; i <= nh; i++) {
                if (index(hdr[i], r) != 1) continue
                t = substr(hdr[i], length(r) + 1)
                if (t ~ /^"[^"]*"$/) t = substr(t, 2, length(t) - 2)
                else if (index(t, ".")) continue
                print "runtime " t
            }
        }' "$1"
}

# gvz_fact DUMP NAME : sets GVZ_FACT to the dump's fact NAME (gvz_dump_facts; empty when it has none). No subshell.
gvz_fact() {
    GVZ_FACT=
    while IFS= read -r _l; do
        case $_l in "$2 "*)
            GVZ_FACT=${_l#"$2 "}
            return 0
            ;;
        esac
    done <"$1.facts"
}

# gvz_dump_defines DUMP NAME : status 0 when the dump defines the runtime NAME under its CRI prefix (gvz_dump_facts).
gvz_dump_defines() {
    while IFS= read -r _l; do
        [ "$_l" != "runtime $2" ] || return 0
    done <"$1.facts"
    return 1
}

# gvz_handler_keys FILE TABLE : the runtime handler TABLE (e.g. <prefix>.runtimes.runsc) of a config or a dump, as
# sorted `key = value` lines, its subtables' keys prefixed (`options.ConfigPath = "..."`), quotes normalised to double,
# an array or inline table spread over several lines joined: what containerd would run the handler with.
gvz_handler_keys() {
    awk -v t="$2" "$GVZ_AWK_TOML"'
        BEGIN { tq = t; sub(/\.[^.]*$/, "", tq); name = t; sub(/^.*\./, "", name); tq = tq ".\"" name "\"" }
        /^[ \t]*\[/ {
            h = toml_header($0); cur = ""
            if (h == t || h == tq) cur = "."
            else if (index(h, t ".") == 1) cur = substr(h, length(t) + 2) "."
            else if (index(h, tq ".") == 1) cur = substr(h, length(tq) + 2) "."
            next
        }
        cur == "" { next }
        {
            line = $0; sub(/^[ \t]+/, "", line); sub(/[ \t]+$/, "", line)
            if (line == "" || line ~ /^#/) next
            n = index(line, "=")
            if (n == 0 || open) { if (last) val[last] = val[last] " " line; if (line ~ /[]}]$/) open = 0; next }
            key = substr(line, 1, n - 1); sub(/[ \t]+$/, "", key); gsub(/\047/, "\"", key)
            v = substr(line, n + 1); sub(/^[ \t]+/, "", v); gsub(/\047/, "\"", v)
            last = (cur == "." ? "" : cur) key; val[last] = v
            open = (v ~ /^[[{]/ && v !~ /[]}]$/)
        }
        END { for (k in val) print k " = " val[k] }' "$1" | sort
}

# gvz_judge_handler EXPECTED EFFECTIVE : compares two gvz_handler_keys listings, the handler gvisorgen's block defines
# and the one containerd would use. Prints one line per difference (a key with another value, a key gvisorgen's block
# does not set with a non-zero value, a key of the block missing), the handler's own keys before its options';
# status 1 when there is any. Every key the
# block does not set must keep containerd's zero value ("", 0, false, [], {}): anything else (a BinaryName, a
# base_runtime_spec, a snapshotter...) changes what runs, and is not gvisorgen's to vouch for.
gvz_judge_handler() {
    awk '
        { k = $0; sub(/ = .*/, "", k); v = substr($0, length(k) + 4) }
        NR == FNR { want[k] = v; next }
        function out(k, s) { print (index(k, ".") ? 1 : 0) "\t" s }
        { seen[k] = 1
          if (k in want) { if (v != want[k]) out(k, k " = " v " (gvisorgen: " want[k] ")") }
          else if (v !~ /^(""|0|false|\[ *\]|\{ *\})$/) out(k, k " = " v " (gvisorgen sets no " k ")") }
        END { for (k in want) if (!(k in seen)) out(k, k " is not set (gvisorgen: " want[k] ")") }' "$1" "$2" | sort | cut -f 2- >"$GVZ_TMP/judge"
    cat "$GVZ_TMP/judge"
    [ ! -s "$GVZ_TMP/judge" ]
}

# gvz_import_files PATTERNS : every file the imports patterns (one per line, absolute: gvz_imports) make containerd
# load on the host now (gvz_import_expand), in its order, without CONTAINERD_CONFIG and gvisorgen's own files next to
# it; one host path per line.
gvz_import_files() {
    gvz_import_expand "$1" | awk -v a="$CONTAINERD_CONFIG" -v b="$GVZ_CHECK" -v c="$GVZ_APPLIED" -v d="$GVZ_BACKUP" \
        -v e="$GVZ_DROPIN_STAGED" '$0 != a && $0 != b && $0 != c && $0 != d && $0 != e && !seen[$0]++'
}

# gvz_handler_files BASE PATTERNS NAME : the files that define the runtime handler NAME: BASE (the config without
# gvisorgen's block, named CONTAINERD_CONFIG) and every imported file whose text names a runtimes.NAME table or key.
gvz_handler_files() {
    _re="runtimes[.][\"']?$3[\"']?([].[:space:]=]|\$)"
    if grep -qE "$_re" "$1"; then echo "$CONTAINERD_CONFIG"; fi
    gvz_import_files "$2" | while IFS= read -r _f; do
        [ "$_f" != "${GVZ_DROPIN:-}" ] || continue
        if gvz_host grep -qE "$_re" "$_f" 2>/dev/null; then echo "$_f"; fi
    done
}

# gvz_unknown_keys ERRFILE : containerd's "Ignoring unknown key" warnings, parsed (logfmt fields, not the line's
# text): one "plugin=<p> key=<k>" line each, sorted; file, row, column and time are left out, so that the same key
# ignored in a file at another path or row compares equal.
gvz_unknown_keys() {
    grep -i 'unknown key' "$1" | awk '
        function field(name,    re, v) {
            re = "(^| )" name "=(\"([^\"\\\\]|\\\\.)*\"|[^ ]*)"
            if (!match($0, re)) return ""
            v = substr($0, RSTART, RLENGTH); sub(/^ ?[^=]*=/, "", v); gsub(/^"|"$/, "", v); return v
        }
        { print "plugin=" field("plugin") " key=" field("key") }' | sort -u || true
}

# ---------------------------------------------------------------------------------------------------------------
# imports: containerd loads every file an `imports` pattern (Go filepath.Glob; relative to the config's folder) matches.

# containerd 2.2+'s built-in imports pattern: its dump lists it whether or not a file imports it (it loads it only then).
GVZ_BUILTIN_IMPORT='/etc/containerd/conf.d/*.toml'

# GVZ_AWK_GLOB: an awk function, glob(PATTERN, PATH), true when Go's filepath.Match(PATTERN, PATH) is (containerd
# expands `imports` with filepath.Glob): a port of its algorithm, byte by byte (`*` and `?` never match a slash,
# `[...]` classes of chars and ranges negated by ^ alone, backslash escapes inside and outside them), so no pattern is
# ever handed to the regex engine; a pattern Go calls malformed matches nothing (containerd refuses a config with one).
# glob_import(ENTRY, PATH) is containerd's rule for an imports entry: globbed when it holds a `*`, else a path.
# The one spelling of the rule: every awk program that matches an imports pattern prepends it (one process for a whole
# list, where a shell loop would start one per pattern and path). Patterns reach it from files or ENVIRON, never
# awk -v, which would unescape them. ci/node's TestGlobAgreesWithGo holds it to filepath.Match.
GVZ_AWK_GLOB='
function glob_chunk(c, s,    failed, neg, hit, n, lo, hi, r) {
    # matches the chunk c (no *) at the start of s: sets glob_rest to what is left of s; 0 no match, -1 malformed
    failed = 0
    while (c != "") {
        if (!failed && s == "") failed = 1
        if (substr(c, 1, 1) == "[") {
            r = substr(s, 1, 1); if (!failed) s = substr(s, 2)
            c = substr(c, 2); neg = 0; hit = 0; n = 0
            if (substr(c, 1, 1) == "^") { neg = 1; c = substr(c, 2) }
            while (1) {
                if (substr(c, 1, 1) == "]" && n > 0) { c = substr(c, 2); break }
                lo = glob_esc(c); if (lo == "") return -1; c = glob_c
                hi = lo
                if (substr(c, 1, 1) == "-") { hi = glob_esc(substr(c, 2)); if (hi == "") return -1; c = glob_c }
                if (lo <= r && r <= hi) hit = 1
                n++
            }
            if (hit == neg) failed = 1
        } else if (substr(c, 1, 1) == "?") {
            if (!failed) { if (substr(s, 1, 1) == "/") failed = 1; s = substr(s, 2) }
            c = substr(c, 2)
        } else {
            if (substr(c, 1, 1) == "\\") { c = substr(c, 2); if (c == "") return -1 }
            if (!failed) { if (substr(c, 1, 1) != substr(s, 1, 1)) failed = 1; s = substr(s, 2) }
            c = substr(c, 2)
        }
    }
    if (failed) return 0
    glob_rest = s
    return 1
}
function glob_esc(c,    x) {
    # one char of a class (escaped or not) from the start of c: the char, the rest in glob_c; "" when malformed
    x = substr(c, 1, 1)
    if (c == "" || x == "-" || x == "]") return ""
    if (x == "\\") { c = substr(c, 2); x = substr(c, 1, 1); if (c == "") return "" }
    glob_c = substr(c, 2)
    if (glob_c == "") return ""
    return x
}
function glob_scan(p,    i, c, inr) {
    # splits p into glob_star (leading stars), glob_chunk_ (up to the next star outside a class) and glob_p (the rest)
    glob_star = 0
    while (substr(p, 1, 1) == "*") { p = substr(p, 2); glob_star = 1 }
    inr = 0
    for (i = 1; i <= length(p); i++) {
        c = substr(p, i, 1)
        if (c == "\\") { if (i < length(p)) i++ }
        else if (c == "[") inr = 1
        else if (c == "]") inr = 0
        else if (c == "*" && !inr) break
    }
    glob_chunk_ = substr(p, 1, i - 1); glob_p = substr(p, i)
}
function glob(p, s,    star, chunk, k, i, ok) {
    while (p != "") {
        glob_scan(p); star = glob_star; chunk = glob_chunk_; p = glob_p
        if (star && chunk == "") return index(s, "/") == 0
        k = glob_chunk(chunk, s)
        if (k < 0) return 0
        if (k > 0 && (glob_rest == "" || p != "")) { s = glob_rest; continue }
        ok = 0
        if (star) {
            for (i = 1; i <= length(s) && substr(s, i, 1) != "/"; i++) {
                k = glob_chunk(chunk, substr(s, i + 1))
                if (k < 0) return 0
                if (k > 0) {
                    if (p == "" && glob_rest != "") continue
                    s = glob_rest; ok = 1; break
                }
            }
        }
        if (!ok) return 0
    }
    return s == ""
}
function glob_meta(s) {
    # Go hasMeta: s holds a character Match treats specially
    return index(s, "*") || index(s, "?") || index(s, "[") || index(s, "\\")
}
function glob_import(p, s) {
    # containerd globs an imports entry only when it holds a *; any other entry is a path (resolveImports)
    return index(p, "*") ? glob(p, s) : p == s
}'

# gvz_import_matches ENTRY PATH : status 0 when containerd loads PATH for the imports entry ENTRY (glob_import).
gvz_import_matches() {
    GVZ_GLOB_P=$1 GVZ_GLOB_S=$2 awk "$GVZ_AWK_GLOB"' BEGIN { exit !glob_import(ENVIRON["GVZ_GLOB_P"], ENVIRON["GVZ_GLOB_S"]) }'
}

# GVZ_AWK_IMPORTS: awk rules that collect the imports patterns of the files awk reads into pat[1..npat], in order and
# without repeats (gvz_imports says which); the program's own END block uses them. Each file's patterns are the entries
# of its top-level `imports` array (single- or multi-line, before any table), a relative one resolved against the
# config's folder (-v imp_dir), each cleaned (filepath.Clean) as containerd does. The first file is the config's text;
# a later one (its dump) adds its patterns but GVZ_BUILTIN_IMPORT (-v imp_builtin), unless the config's text names it.
# imp_in is 1 on the lines of the array (the key's line included); imp_bad says why a file's array cannot be read
# exactly (gvz_imports_unreadable). Variables are prefixed imp_; no rule here skips a line for the program's own.
# shellcheck disable=SC2016 # awk's $0, not the shell's
GVZ_AWK_IMPORTS='
function imp_clean(p,    n, c, i, k, o, out) {
    # Go filepath.Clean of an absolute path, as containerd cleans each entry before it globs it: no empty, "." or ".."
    # part ("./x*" next to the config is <dir>/x* to containerd, and must be to every check here too)
    n = split(p, c, "/"); k = 0
    for (i = 1; i <= n; i++) {
        if (c[i] == "" || c[i] == ".") continue
        if (c[i] == "..") { if (k > 0) k--; continue }
        o[++k] = c[i]
    }
    out = ""
    for (i = 1; i <= k; i++) out = out "/" o[i]
    return out == "" ? "/" : out
}
function imp_add(p) {
    if (substr(p, 1, 1) != "/") p = imp_dir "/" p
    p = imp_clean(p)
    if (FILENAME == ARGV[1]) imp_mine[p] = 1
    else if (p == imp_builtin && !(imp_builtin in imp_mine)) return
    if (!imp_seen[p]++) pat[++npat] = p
}
function imp_fail(why) { if (imp_bad == "") imp_bad = (imp_file == ARGV[1] ? "its text" : "containerd\047s dump") ": " why; imp_done = 1 }
function imp_scan(line,    i, c, d, h, cp) {
    # one line of the array, TOML as containerd reads it: basic strings (escapes decoded), literal strings (raw),
    # commas, blanks and comments between them, the closing bracket. What this cannot read exactly (a multi-line
    # string, a \u escape beyond ASCII, anything not a string) sets imp_bad: gvz_imports_unreadable refuses the config.
    for (i = 1; i <= length(line) && !imp_done; i++) {
        c = substr(line, i, 1)
        if (imp_st == "b") {
            if (c == "\"") { imp_add(imp_cur); imp_st = ""; continue }
            if (c != "\\") { imp_cur = imp_cur c; continue }
            i++; c = substr(line, i, 1)
            if (c == "\\" || c == "\"") imp_cur = imp_cur c
            else if (c == "t") imp_cur = imp_cur "\t"
            else if (c == "n") imp_cur = imp_cur "\n"
            else if (c == "r") imp_cur = imp_cur "\r"
            else if (c == "b") imp_cur = imp_cur "\b"
            else if (c == "f") imp_cur = imp_cur "\f"
            else if (c == "u" || c == "U") {
                h = substr(line, i + 1, c == "u" ? 4 : 8); cp = 0
                if (length(h) != (c == "u" ? 4 : 8) || h ~ /[^0-9A-Fa-f]/) { imp_fail("a malformed \\" c " escape in imports"); return }
                for (d = 1; d <= length(h); d++) cp = cp * 16 + index("0123456789abcdef", tolower(substr(h, d, 1))) - 1
                if (cp < 32 || cp > 126) { imp_fail("an imports entry with a \\" c " escape beyond printable ASCII"); return }
                imp_cur = imp_cur sprintf("%c", cp); i += length(h)
            } else { imp_fail("an unknown escape \\" c " in imports"); return }
            continue
        }
        if (imp_st == "l") { if (c == "\047") { imp_add(imp_cur); imp_st = "" } else imp_cur = imp_cur c; continue }
        if (c == " " || c == "\t" || c == "," || c == "\r") continue
        if (c == "#") return
        if (imp_st == "=") { if (c != "[") { imp_fail("imports is not an array"); return } imp_st = ""; continue }
        if (c == "]") { imp_done = 1; return }
        if (c == "\"" || c == "\047") {
            if (substr(line, i, 3) == c c c) { imp_fail("a multi-line string in imports"); return }
            imp_st = (c == "\"") ? "b" : "l"; imp_cur = ""; continue
        }
        imp_fail("something other than a string in imports"); return
    }
    if (imp_st == "b" || imp_st == "l") imp_fail("a string in imports runs past its line")
}
FILENAME != imp_file { if (imp_on && !imp_done) imp_fail("imports never closes its array"); imp_file = FILENAME; imp_on = 0; imp_done = 0 }
{ imp_in = 0 }
!imp_done && !imp_on && /^[ \t]*\[/ { imp_done = 1 }
!imp_done && !imp_on && /^[ \t]*(imports|"imports"|\047imports\047)[ \t]*=/ {
    imp_on = imp_in = 1; imp_st = "="; imp_line = $0; sub(/^[^=]*=/, "", imp_line); imp_scan(imp_line)
}
!imp_done && imp_on && !imp_in { imp_in = 1; imp_scan($0) }
END { if (imp_on && !imp_done) imp_fail("imports never closes its array") }'

# gvz_imports CONFIG [DUMP] : the imports patterns of a config's text and, with DUMP, of its dump (1.x dumps the files
# it resolved, the config itself among them; 2.x the patterns of every file it loaded, nested imports included), one
# per line, without repeats (GVZ_AWK_IMPORTS). The dump's GVZ_BUILTIN_IMPORT is left out unless the config's text names
# it (a file the config imports that names it is then missed). One process: this runs several times a configure run.
gvz_imports() {
    awk -v imp_dir="$GVZ_CFG_DIR" -v imp_builtin="$GVZ_BUILTIN_IMPORT" -v bad="$GVZ_TMP/imports.bad" "$GVZ_AWK_IMPORTS"'
        END { if (imp_bad != "") { print imp_bad >bad; exit 3 } for (i = 1; i <= npat; i++) print pat[i] }' "$@" ||
        gvz_imports_unreadable "$(cat "$GVZ_TMP/imports.bad" 2>/dev/null || echo "awk failed")"
}

# gvz_imports_unreadable WHY : refuse a config whose imports gvisorgen cannot read exactly (GVZ_AWK_IMPORTS' imp_bad).
gvz_imports_unreadable() {
    gvz_die "cannot read the imports of $CONTAINERD_CONFIG exactly ($1), so gvisorgen cannot tell which files containerd loads; nothing was changed and containerd was not restarted. Fix: write each imports entry as a plain one-line string, then let the installer retry"
}

# gvz_check_imports FILE... : refuse when an imports pattern of the config (gvz_imports of its text and its dump)
# matches a file gvisorgen keeps next to it that is not a containerd config (the applied marker, the backup, temp
# files; the transient candidate is left out of every import list gvisorgen validates with): containerd would load
# it at its next start (the applied marker is not TOML: containerd would not start). Notes when RUNSC_CONFIG is
# matched: containerd then loads the shim's options file as a config too (2.x logs its keys as unknown, nothing else).
gvz_check_imports() {
    # one line per finding, in the patterns' order, tab-separated (a pattern may hold blanks): "hit PATTERN FILE...",
    # "class PATTERN HANDLER", "runsc PATTERN"
    awk -v imp_dir="$GVZ_CFG_DIR" -v imp_builtin="$GVZ_BUILTIN_IMPORT" \
        -v own="$GVZ_APPLIED $GVZ_BACKUP $GVZ_DROPIN_STAGED $GVZ_CFG_DIR/.${CONTAINERD_CONFIG##*/}.gvisorgen-tmp.1" \
        -v classes="${GVZ_CLASSES:-}" -v rdir="${RUNSC_CONFIG%/*}" -v rcfg="$RUNSC_CONFIG" "$GVZ_AWK_GLOB$GVZ_AWK_IMPORTS"'
        END {
            if (imp_bad != "") { print "bad\t" imp_bad "\t"; exit }
            no = split(own, ow, " "); nc = split(classes, hs, " ")
            for (j = 1; j <= npat; j++) {
                p = pat[j]; hit = ""
                for (i = 1; i <= no; i++) if (glob_import(p, ow[i])) hit = hit " " ow[i]
                if (hit != "") { print "hit\t" p "\t" substr(hit, 2); exit }
                for (i = 1; i <= nc; i++) if (glob_import(p, rdir "/" hs[i] ".toml")) print "class\t" p "\t" hs[i]
                if (glob_import(p, rcfg)) print "runsc\t" p
            }
        }' "$@" >"$GVZ_TMP/imports.found"
    _tab=$(printf '\t')
    while IFS=$_tab read -r _what _p _rest; do
        case $_what in
        bad) gvz_imports_unreadable "$_p" ;;
        hit) gvz_die "the imports pattern $_p of $CONTAINERD_CONFIG matches files gvisorgen writes next to it ($(echo "$_rest" | sed 's/gvisorgen-tmp\.1/gvisorgen-tmp.<pid>/')), which are not containerd configs: containerd would load them at its next start (the applied marker is not TOML); nothing was changed and containerd was not restarted. Fix: narrow the pattern (e.g. to *.toml), then let the installer retry" ;;
        class) gvz_log "note: the imports pattern $_p also matches ${RUNSC_CONFIG%/*}/$_rest.toml, the runsc.toml of the class with handler $_rest: containerd loads it as a config too (2.x logs its keys as unknown; nothing else changes)" ;;
        runsc) gvz_log "note: the imports pattern $_p also matches $RUNSC_CONFIG, so containerd loads the shim's options file as a config too (2.x logs its keys as unknown; nothing else changes); set RUNSC_CONFIG (values: runscConfig) to a name the pattern does not match to avoid it" ;;
        esac
    done <"$GVZ_TMP/imports.found"
}

# gvz_self_importing FILE... : status 0 when an imports pattern of the config (gvz_imports) matches CONTAINERD_CONFIG
# itself. A copy validated next to it would then import the live file (containerd skips only the file it started with).
gvz_self_importing() {
    awk -v imp_dir="$GVZ_CFG_DIR" -v imp_builtin="$GVZ_BUILTIN_IMPORT" -v c="$CONTAINERD_CONFIG" "$GVZ_AWK_GLOB$GVZ_AWK_IMPORTS"'
        END { for (i = 1; i <= npat; i++) if (glob_import(pat[i], c)) exit 0; exit 1 }' "$@"
}

# gvz_check_is_copy : status 0 when gvz_to_check writes the config as it is (it imports neither itself nor a drop-in
# folder of gvisorgen's): the copy, in the config's own folder, then loads what the config loads.
gvz_check_is_copy() { [ -z "${GVZ_SELF_IMPORT:-}" ] && [ -z "${GVZ_DROPIN:-}" ]; }

# gvz_to_check SRC IMPORTS [STAGED] : writes SRC to the candidate path for `config dump`. The copy gets an explicit
# `imports` list when the config imports itself (gvz_self_importing) or a drop-in folder of gvisorgen's (GVZ_DROPIN set):
# every file the patterns of IMPORTS (the config's own, gvz_imports of its text) make containerd load on the host now,
# in its order (gvz_import_expand), except CONTAINERD_CONFIG, the candidate and gvisorgen's drop-in as it is on disk;
# with STAGED, the staged drop-in takes GVZ_DROPIN's place in that order (as if GVZ_DROPIN were there), so that the
# copy loads exactly what containerd will load at its next start.
gvz_to_check() {
    if gvz_check_is_copy; then
        cp "$1" "$HOST_ROOT$GVZ_CHECK"
        return
    fi
    _files=$(
        GVZ_EXPAND_AS=${3:+${GVZ_DROPIN:-}} gvz_import_expand "$2" |
            awk -v a="$CONTAINERD_CONFIG" -v b="$GVZ_CHECK" -v d="${GVZ_DROPIN:-}" -v s="${3:-}" "$GVZ_AWK_GLOB"'
                BEGIN { for (i = 1; i < 32; i++) ctl[sprintf("%c", i)] = sprintf("\\u%04X", i); ctl[sprintf("%c", 127)] = "\\u007F" }
                function entry(f,    o, i, c, g) {
                    # containerd globs an entry holding a *: each glob character of such a path escaped (Match reads
                    # \x as x); then a TOML basic string
                    g = index(f, "*") > 0; o = ""
                    for (i = 1; i <= length(f); i++) {
                        c = substr(f, i, 1)
                        if (g && glob_meta(c)) o = o "\\\\"
                        if (c == "\\" || c == "\"") o = o "\\" c; else if (c in ctl) o = o ctl[c]; else o = o c
                    }
                    return "\"" o "\""
                }
                $0 == a || $0 == b || seen[$0]++ { next }
                $0 == d { if (s == "") next; $0 = s }
                { printf "%s%s", (n++ ? ", " : ""), entry($0) }'
    )
    {
        printf 'imports = [%s]\n' "$_files"
        # the rest of the config without its imports array (its lines as GVZ_AWK_IMPORTS reads them)
        awk -v imp_dir="$GVZ_CFG_DIR" "$GVZ_AWK_IMPORTS"' !imp_in { print }' "$1"
    } >"$HOST_ROOT$GVZ_CHECK"
}

# gvz_import_expand PATTERNS : the paths containerd loads for the imports entries of PATTERNS (one per line, absolute
# and cleaned: gvz_imports), in its order, regular files only (a folder or a missing path is no config), one per line,
# repeats left in. As containerd's resolveImports: an entry holding a `*` is expanded as Go's filepath.Glob does (part
# by part from the first with a glob character, each folder's names sorted bytewise, dot files included, glob_import
# judging each name), any other entry is a path. The host is asked once per globbed part (one `sh` listing the folders
# of that round: their names and types). With GVZ_EXPAND_AS=PATH, PATH counts as a file there (the staged drop-in's
# place). Names holding a newline are not listed (they cannot be written one per line).
gvz_import_expand() {
    # a round's records, one field per line (a name may hold a tab): "F" DIR REST (the folder DIR, then the parts REST
    # still to match), "L" PATH (a path, kept if a file), "R" PATH (a result); the host's requests: "D"DIR or "T"PATH
    # (files emptied with `:` and swapped by name: no process for either, this runs several times a configure run)
    : >"$GVZ_TMP/expand.req"
    _in=$GVZ_TMP/expand.0 _out=$GVZ_TMP/expand.1
    awk -v req="$GVZ_TMP/expand.req" "$GVZ_AWK_GLOB"'
        !index($0, "*") { print "L"; print $0; print "T" $0 >req; next }
        {
            n = split(substr($0, 2), c, "/"); d = ""
            for (i = 1; i < n && !glob_meta(c[i]); i++) d = d "/" c[i]
            if (d == "") d = "/"
            r = c[i]
            for (i++; i <= n; i++) r = r "/" c[i]
            print "F"; print d; print r; print "D" d >req
        }' "$1" >"$_in"
    while [ -s "$GVZ_TMP/expand.req" ]; do
        # shellcheck disable=SC2016 # run by the host shell: each folder's names with their types, or one path's type
        gvz_host sh -c 'nl="
"
            while IFS= read -r q; do
                p=${q#?}
                case $q in T*)
                    if [ -f "$p" ]; then echo Tf; else echo To; fi
                    continue
                    ;;
                esac
                printf "D%s\n" "$p"
                for f in "$p"/* "$p"/.*; do
                    n=${f##*/}
                    case $n in . | .. | *"$nl"*) continue ;; esac
                    if [ -f "$f" ]; then t=f; elif [ -d "$f" ]; then t=d; elif [ -e "$f" ] || [ -L "$f" ]; then t=o; else continue; fi
                    printf "%s%s\n" "$t" "$n"
                done
            done' <"$GVZ_TMP/expand.req" >"$GVZ_TMP/expand.list"
        : >"$GVZ_TMP/expand.req"
        LC_ALL=C awk -v as="${GVZ_EXPAND_AS:-}" -v req="$GVZ_TMP/expand.req" "$GVZ_AWK_GLOB"'
            function join(d, n) { return d == "/" ? "/" n : d "/" n }
            function add(d, n, t,    k) {
                # a folder s names, kept sorted bytewise (compared as strings: "10" before "9")
                if ((d, n) in typ) return
                typ[d, n] = t
                k = ++cnt[d]
                while (k > 1 && (name[d, k - 1] "") > (n "")) { name[d, k] = name[d, k - 1]; k-- }
                name[d, k] = n
            }
            FILENAME == ARGV[1] {
                c = substr($0, 1, 1); v = substr($0, 2)
                if (c == "T") ltype[++nt] = v
                else if (c == "D") {
                    cur = v; cnt[cur] += 0
                    # GVZ_EXPAND_AS is there, and so is every folder on its way (it may not exist yet)
                    if (as != "" && index(as, join(cur, "")) == 1 && (r = substr(as, length(join(cur, "")) + 1)) != "") {
                        if (k = index(r, "/")) add(cur, substr(r, 1, k - 1), "d"); else add(cur, r, "f")
                    }
                }
                else add(cur, v, c)
                next
            }
            rec == "" { rec = $0; nf = 0; next }
            { f[++nf] = $0 }
            rec == "R" { print "R"; print f[1]; rec = ""; next }
            rec == "L" { if (ltype[++lt] == "f" || (as != "" && f[1] == as)) { print "R"; print f[1] } rec = ""; next }
            rec == "F" && nf == 2 {
                d = f[1]; part = f[2]; rest = ""
                if (i = index(part, "/")) { rest = substr(part, i + 1); part = substr(part, 1, i - 1) }
                for (k = 1; k <= cnt[d]; k++) {
                    n = name[d, k]
                    if (!glob(part, n)) continue
                    if (rest == "" && typ[d, n] == "f") { print "R"; print join(d, n) }
                    else if (rest != "" && typ[d, n] == "d") { print "F"; print join(d, n); print rest; print "D" join(d, n) >req }
                }
                rec = ""
            }' "$GVZ_TMP/expand.list" "$_in" >"$_out"
        _t=$_in _in=$_out _out=$_t
    done
    # only results are left: "R" and a path each
    while IFS= read -r _r && IFS= read -r _p; do printf '%s\n' "$_p"; done <"$_in"
}

# ---------------------------------------------------------------------------------------------------------------
# gvisorgen's drop-in: one file in a folder that the config imports (containerd 2.x merges plugin tables across files)

GVZ_DROPIN_NAME=gvisorgen-runsc.toml
GVZ_MANAGED='# Managed by gvisorgen'

# gvz_dropin_path FILE : where gvisorgen's drop-in goes, or nothing: GVZ_DROPIN_NAME in the folder of the first
# `imports` pattern of FILE's own text (never its dump's: containerd 2.2+ dumps its built-in conf.d pattern whether or
# not a file imports it, and it loads only what the files import) whose folder is containerd's config folder or under
# it (mounted in the pod), spelled without glob characters, and whose glob matches the drop-in but not gvisorgen's
# temp files beside it (containerd would load a half-written one).
gvz_dropin_path() {
    awk -v imp_dir="$GVZ_CFG_DIR" -v imp_builtin="$GVZ_BUILTIN_IMPORT" -v cfg="$GVZ_CFG_DIR" -v n="$GVZ_DROPIN_NAME" \
        -v r="$RUNSC_CONFIG" "$GVZ_AWK_GLOB$GVZ_AWK_IMPORTS"'
        END {
            for (i = 1; i <= npat; i++) {
                # (bracket expressions as strings: inside a bracket, "\/" would allow a backslash too)
                p = pat[i]; d = p; sub("/[^/]*$", "", d)
                if (d ~ "[^A-Za-z0-9._/-]" || index(d, "//") || index(d "/", "/./") || index(d "/", "/../")) continue
                if (d != cfg && index(d, cfg "/") != 1) continue
                if (!glob_import(p, d "/" n) || glob_import(p, d "/." n ".gvisorgen-tmp.1") || d "/" n == r) continue
                print d "/" n; exit
            }
        }' "$1"
}

# gvz_is_managed FILE : a plain file (not a symlink) whose first line is gvisorgen's managed header.
gvz_is_managed() {
    [ -f "$1" ] && [ ! -L "$1" ] && head -n 1 "$1" | grep -q "^$GVZ_MANAGED"
}

# gvz_dump_sans DUMP TABLE : the dump without TABLE and its subtables, and without the top-level `imports` line (the
# validated copies list their files explicitly): what must stay byte for byte when a drop-in adds only TABLE.
gvz_dump_sans() {
    awk -v t="$2" -v imp_dir="$GVZ_CFG_DIR" "$GVZ_AWK_TOML$GVZ_AWK_IMPORTS"'
        /^[ \t]*\[/ { h = toml_header($0); drop = (h == t || index(h, t ".") == 1) }
        !drop && !imp_in { print }' "$1"
}

# ---------------------------------------------------------------------------------------------------------------
# The managed block in containerd's config

GVZ_BEGIN='# >>> gvisorgen: runsc runtime (managed block; edits between these markers are overwritten) >>>'
GVZ_END='# <<< gvisorgen: runsc runtime <<<'

# gvz_block_count FILE : prints "<begins> <ends>".
gvz_block_count() {
    awk -v b="$GVZ_BEGIN" -v e="$GVZ_END" '$0 == b { nb++ } $0 == e { ne++ } END { print nb + 0, ne + 0 }' "$1"
}

# The block carries this line when the file before it ended without a newline (the block is then preceded by the
# newline gvisorgen added and the blank line), so that removing the block gives the original bytes back exactly.
GVZ_NO_EOL='# gvisorgen: the config before this block ended without a newline (removing the block restores that)'

# gvz_ends_without_eol FILE : status 0 when FILE is not empty and its last byte is not a newline.
gvz_ends_without_eol() { [ -s "$1" ] && [ -n "$(tail -c 1 "$1")" ]; }

# gvz_strip_block FILE : the file without the managed block, byte for byte what it was before gvisorgen added it: the
# blank line written before the block goes too, and a file that ended without a newline ends without one again
# (GVZ_NO_EOL inside the block says so). A file without a (complete) block is printed unchanged.
gvz_strip_block() {
    set -- "$1" "$(gvz_block_count "$1")"
    if [ "$2" = "0 0" ]; then
        cat "$1"
        return 0
    fi
    awk -v b="$GVZ_BEGIN" -v e="$GVZ_END" -v f="$GVZ_NO_EOL" '
        { line[NR] = $0 }
        $0 == b { bi = NR }
        $0 == e { ei = NR }
        $0 == f { fi = NR }
        END {
            noeol = 0
            if (bi && ei >= bi) {
                from = bi; to = ei; if (bi > 1 && line[bi - 1] == "") from = bi - 1
                noeol = (fi > bi && fi < ei)
            }
            n = 0
            for (i = 1; i <= NR; i++) if (!(from && i >= from && i <= to)) out[++n] = line[i]
            for (i = 1; i <= n; i++) printf "%s%s", out[i], (i < n || !noeol) ? "\n" : ""
        }' "$1"
}

# ---------------------------------------------------------------------------------------------------------------
# Lock: the folder STATE_DIR/lock holding the file "holder": "boot_id pidns pid starttime host epoch name". A lock
# appears with its holder in it: a run stages .lock.new.<pid>/holder and renames that folder onto "lock", which the
# kernel allows only while "lock" is absent or empty (renaming a folder onto a non-empty one fails), so one run wins
# and no lock is ever seen without its holder while it is held. A holder provably gone (other boot; same pid namespace
# and no such process or another start time; another pid namespace in which no process is left on the host, asked
# through HOST_EXEC) is broken by moving its holder file aside, to lock/holder.broken.<pid>: one rename, which only one
# breaker wins. If the file moved aside is the one judged gone, the folder is removed; if not (another run took the
# lock since it was judged), it is put back: while it is aside the folder is not empty, so nobody can take the lock in
# between. An aside file whose breaker died is put back by the next run. A live holder is waited for up to
# LOCK_TIMEOUT_SECONDS, then the run fails (and the init container retries).

GVZ_LOCK_HELD=

gvz_boot_id() { cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo unknown-boot; }
gvz_pidns() { readlink /proc/self/ns/pid 2>/dev/null || echo unknown-pidns; }
# gvz_proc_stat PID : sets _gvz_stat to the fields of /proc/PID/stat after the command name (which may hold ") "), ""
# when PID is gone. Read by the shell: the lock and the sweeps ask it on every run.
gvz_proc_stat() {
    _gvz_stat=
    { read -r _gvz_stat <"/proc/$1/stat"; } 2>/dev/null || true
    _gvz_stat=${_gvz_stat##*) }
}
gvz_starttime() {
    gvz_proc_stat "$1"
    # shellcheck disable=SC2086 # split into its fields on purpose (numbers and a state letter)
    set -- $_gvz_stat
    echo "${20:-}"
}

# gvz_holder_gone "HOLDER LINE" : status 0 when the recorded holder can no longer be running.
gvz_holder_gone() {
    # shellcheck disable=SC2086 # the holder line is split into its fields on purpose
    set -- $1
    [ $# -ge 4 ] || return 0
    [ "$1" = "$(gvz_boot_id)" ] || return 0
    if [ "$2" = "$(gvz_pidns)" ]; then
        [ "$(gvz_starttime "$3")" = "$4" ] && return 1
        return 0
    fi
    # Another pid namespace (another container or pod): gone when no host process is left in it.
    # shellcheck disable=SC2016 # expanded by the host shell
    if gvz_host sh -c 'ls -l /proc/[0-9]*/ns/pid 2>/dev/null | grep -qF -- "$1"' sh "$2"; then
        return 1
    fi
    # Only trust "gone" when the host listing itself worked (it must at least show its own namespace).
    # shellcheck disable=SC2016 # expanded by the host shell
    gvz_host sh -c 'ls -l /proc/self/ns/pid 2>/dev/null | grep -q "pid:\["' sh >/dev/null 2>&1
}

gvz_lock() {
    _dir=$HOST_ROOT$STATE_DIR
    [ -d "$_dir" ] || mkdir -p "$_dir" 2>/dev/null || gvz_die "state dir $STATE_DIR is not mounted at $_dir"
    GVZ_LOCK_DIR=$_dir/lock
    GVZ_ME="$(gvz_boot_id) $(gvz_pidns) $$ $(gvz_starttime $$) $(hostname) $(date +%s) $GVZ_NAME"
    _new=$_dir/.lock.new.$$
    GVZ_CLEANUP_FILES="$GVZ_CLEANUP_FILES $_new"
    { mkdir "$_new" && printf '%s\n' "$GVZ_ME" >"$_new/holder"; } 2>/dev/null ||
        gvz_die "cannot write the lock's staging folder ${_new#"$HOST_ROOT"}"
    _end=$(($(date +%s) + LOCK_TIMEOUT_SECONDS))
    _said=
    while :; do
        if mv -T "$_new" "$GVZ_LOCK_DIR" 2>/dev/null; then
            GVZ_LOCK_HELD=1
            gvz_clean_leftovers
            return 0
        fi
        _h=$(cat "$GVZ_LOCK_DIR/holder" 2>/dev/null || true)
        if [ -n "$_h" ]; then
            if gvz_holder_gone "$_h"; then
                gvz_break_lock "$_h"
                continue
            fi
        elif gvz_unbreak_lock; then
            continue
        fi
        [ -n "$_said" ] || gvz_log "waiting for the lock $STATE_DIR/lock held by: ${_h:-<a run breaking it, or no holder file>}"
        _said=1
        [ "$(date +%s)" -lt "$_end" ] || gvz_die "another gvisorgen run still holds $STATE_DIR/lock after ${LOCK_TIMEOUT_SECONDS}s (holder: ${_h:-<none: see what $STATE_DIR/lock holds>}); retry later"
        sleep 0.5
    done
}

# gvz_break_lock "HOLDER LINE" : break the lock of a holder judged gone (see above); status 0 either way.
gvz_break_lock() {
    _aside=$GVZ_LOCK_DIR/holder.broken.$$
    mv "$GVZ_LOCK_DIR/holder" "$_aside" 2>/dev/null || return 0
    if [ "$(cat "$_aside" 2>/dev/null || true)" != "$1" ]; then
        # another run took the lock since its holder was judged: give that run its holder back
        mv "$_aside" "$GVZ_LOCK_DIR/holder" 2>/dev/null || true
        return 0
    fi
    rm -f "$_aside"
    rmdir "$GVZ_LOCK_DIR" 2>/dev/null || true
    gvz_log "broke a stale lock (holder gone): $1"
}

# gvz_unbreak_lock : the lock has no holder file: put back one that a breaker moved aside and died with; status 1 when
# there is none (a breaker still at work, or a folder being removed: the caller waits).
gvz_unbreak_lock() {
    for _gvz_f in "$GVZ_LOCK_DIR"/holder.broken.*; do
        if [ ! -f "$_gvz_f" ] || [ -L "$_gvz_f" ]; then continue; fi
        _gvz_p=${_gvz_f##*.}
        gvz_is_uint "$_gvz_p" || continue
        ! gvz_pid_runs_script "$_gvz_p" || continue
        if mv "$_gvz_f" "$GVZ_LOCK_DIR/holder" 2>/dev/null; then
            gvz_log "put back the lock's holder file that run $_gvz_p moved aside to break it and did not finish"
            return 0
        fi
    done
    return 1
}

gvz_unlock() {
    [ -n "$GVZ_LOCK_HELD" ] || return 0
    GVZ_LOCK_HELD=
    [ "$(cat "$GVZ_LOCK_DIR/holder" 2>/dev/null || true)" = "$GVZ_ME" ] || return 0
    # The holder file first: from then on the folder is empty and the next run may take it (rename onto it) before
    # the rmdir, which then fails, as it should.
    rm -f "$GVZ_LOCK_DIR/holder"
    rmdir "$GVZ_LOCK_DIR" 2>/dev/null || true
}

# ---------------------------------------------------------------------------------------------------------------
# Leftovers of runs that did not finish (SIGKILL, OOM, node crash: no trap runs). Every transient file or folder the
# scripts make on the host is made while they hold the lock and is named with the maker's pid ($$), so a run that has
# just taken the lock removes those of earlier runs, and only those: a name only gvisorgen gives (the patterns below)
# in a folder it writes, a regular file or a folder holding nothing but what gvisorgen puts there, and its maker gone:
# nobody else holds the lock (so no other run is between taking and releasing it), and the pid in the name is not a
# live process running an installer script (the init containers share the host's pid namespace; this also guards the
# names made outside the lock: a waiting run's scratch and lock staging folders, and an older installer's lock being
# broken). Folders outside the ones this container mounts are skipped (not there).
#   <dir>/.<name>.gvisorgen-tmp.<pid>   temp file of an atomic write (INSTALL_DIR and its gvisor-bin/, the config's
#                                       folder, RUNSC_CONFIG's folder, STATE_DIR), or the staging folder of RUNSC_CONFIG's
#                                       folder (holding only .gvisorgen-created)
#   INSTALL_DIR/.gvisorgen-probe.<pid>  the writability probe
#   INSTALL_DIR/gvisor-releases/.<version>.new.<pid>  a release's folder being filled, before its rename
#   INSTALL_DIR/gvisor-releases/.<version>.old.<pid>  a release's folder renamed aside for its replacement (put back
#                                       when the replacement is not there)
#   INSTALL_DIR/.gvisorgen-foreign.new.<pid>  the aside folder of a takeover of foreign binaries, before its rename
#   STATE_DIR/.gvisorgen-ca.<pid>.pem   the CA bundle for the host's curl
#   STATE_DIR/.lock.new.<pid>           the staging folder of a lock (holding only its holder file)
#   STATE_DIR/lock.stale.<pid>          a stale lock being broken by an installer older than this one (same)
#   CONTAINERD_CONFIG.gvisorgen-check   the candidate being validated (no pid: the lock alone proves its maker gone)
#   ${TMPDIR:-/tmp}/gvisorgen.<pid>.*   scratch (downloads, unpacked archive) in the container's emptyDir, which outlives
#                                       a killed init container and is capped by tmpSizeLimit

# gvz_pid_runs_script PID : status 0 when PID is another live process (not a zombie) running an installer script.
gvz_pid_runs_script() {
    [ "$1" != "$$" ] || return 1
    gvz_proc_stat "$1"
    _gvz_st=${_gvz_stat%% *}
    [ -n "$_gvz_st" ] && [ "$_gvz_st" != Z ] || return 1
    tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" | grep -qE '(install-runsc|configure-containerd|uninstall)\.sh'
}

# gvz_sweep PATH PID [INSIDE] : remove PATH, a leftover named by gvisorgen with its maker's PID, unless that maker still
# runs: a regular file, a folder holding at most the file INSIDE, or, INSIDE "*", a scratch folder (all it holds).
# Symlinks and anything else are left alone.
gvz_sweep() {
    [ -e "$1" ] && [ ! -L "$1" ] || return 0
    gvz_is_uint "$2" || return 0
    if gvz_pid_runs_script "$2"; then
        gvz_log "left ${1#"$HOST_ROOT"} in place: process $2, which made it, still runs an installer script"
        return 0
    fi
    if [ -f "$1" ]; then
        rm -f "$1"
    elif [ -d "$1" ] && [ "${3:-}" = "*" ]; then
        rm -rf "$1"
    elif [ -d "$1" ] && [ -n "${3:-}" ]; then
        for _gvz_e in "$1"/* "$1"/.*; do
            case ${_gvz_e##*/} in . | ..) continue ;; esac
            [ -e "$_gvz_e" ] || [ -L "$_gvz_e" ] || continue
            if [ "${_gvz_e##*/}" != "$3" ] || [ -L "$_gvz_e" ] || [ ! -f "$_gvz_e" ]; then
                gvz_log "left ${1#"$HOST_ROOT"} in place: it holds more than gvisorgen puts there"
                return 0
            fi
        done
        rm -f "$1/$3"
        rmdir "$1"
    else
        return 0
    fi
    gvz_log "removed ${1#"$HOST_ROOT"}, left by an earlier run that did not finish (process $2, gone)"
}

# gvz_clean_leftovers : with the lock just taken, remove what killed runs left (see above).
gvz_clean_leftovers() {
    for _gvz_d in "$HOST_ROOT$INSTALL_DIR" "$HOST_ROOT$GVZ_CFG_DIR" "$HOST_ROOT${RUNSC_CONFIG%/*}" "$HOST_ROOT$STATE_DIR"; do
        if [ ! -d "$_gvz_d" ] || [ -L "$_gvz_d" ]; then continue; fi
        for _gvz_f in "$_gvz_d"/.?*.gvisorgen-tmp.*; do gvz_sweep "$_gvz_f" "${_gvz_f##*.}" "$GVZ_DIR_MARK"; done
    done
    _gvz_d=$HOST_ROOT$INSTALL_DIR
    if [ -d "$_gvz_d" ]; then
        for _gvz_f in "$_gvz_d"/.gvisorgen-probe.*; do gvz_sweep "$_gvz_f" "${_gvz_f##*.}"; done
        # the aside folder of a takeover killed before it was renamed into place holds its manifest only
        for _gvz_f in "$_gvz_d"/.gvisorgen-foreign.new.*; do gvz_sweep "$_gvz_f" "${_gvz_f##*.}" manifest; done
        # a release being filled (.<version>.new.<pid>: removed whole), or one renamed aside to be replaced
        # (.<version>.old.<pid>: put back when the replacement never arrived, else removed)
        if [ -d "$_gvz_d/$GVZ_RELEASES_NAME" ] && [ ! -L "$_gvz_d/$GVZ_RELEASES_NAME" ]; then
            for _gvz_f in "$_gvz_d/$GVZ_RELEASES_NAME"/.*.new.*; do gvz_sweep "$_gvz_f" "${_gvz_f##*.}" "*"; done
            for _gvz_f in "$_gvz_d/$GVZ_RELEASES_NAME"/.*.old.*; do
                if [ ! -d "$_gvz_f" ] || [ -L "$_gvz_f" ]; then continue; fi
                ! gvz_pid_runs_script "${_gvz_f##*.}" || continue
                _gvz_p=${_gvz_f##*/.}
                _gvz_p=${_gvz_f%/*}/${_gvz_p%.old.*}
                if [ ! -e "$_gvz_p" ] && mv "$_gvz_f" "$_gvz_p"; then
                    gvz_log "put ${_gvz_p#"$HOST_ROOT"} back: an earlier run was killed while replacing it"
                else
                    gvz_sweep "$_gvz_f" "${_gvz_f##*.}" "*"
                fi
            done
        fi
        if [ -d "$_gvz_d/gvisor-bin" ] && [ ! -L "$_gvz_d/gvisor-bin" ]; then
            find "$_gvz_d/gvisor-bin" -type f -name '.?*.gvisorgen-tmp.*' | while IFS= read -r _gvz_f; do
                gvz_sweep "$_gvz_f" "${_gvz_f##*.}"
            done
        fi
    fi
    _gvz_d=$HOST_ROOT$STATE_DIR
    if [ -d "$_gvz_d" ]; then
        for _gvz_f in "$_gvz_d"/.gvisorgen-ca.*.pem; do
            _gvz_p=${_gvz_f%.pem}
            gvz_sweep "$_gvz_f" "${_gvz_p##*.}"
        done
        for _gvz_f in "$_gvz_d"/.lock.new.* "$_gvz_d"/lock.stale.*; do gvz_sweep "$_gvz_f" "${_gvz_f##*.}" holder; done
    fi
    for _gvz_f in "$GVZ_CHECK" "$GVZ_DROPIN_STAGED"; do
        if [ -f "$HOST_ROOT$_gvz_f" ] && [ ! -L "$HOST_ROOT$_gvz_f" ]; then
            rm -f "$HOST_ROOT$_gvz_f"
            gvz_log "removed $_gvz_f, left by an earlier run that did not finish"
        fi
    done
    # a drop-in's temp file in a subfolder of containerd's config folder (conf.d/.gvisorgen-runsc.toml.gvisorgen-tmp.<pid>)
    for _gvz_f in "$HOST_ROOT$GVZ_CFG_DIR"/*/."$GVZ_DROPIN_NAME".gvisorgen-tmp.*; do gvz_sweep "$_gvz_f" "${_gvz_f##*.}"; done
    for _gvz_f in "${TMPDIR:-/tmp}"/gvisorgen.*.*; do
        [ "$_gvz_f" != "$GVZ_TMP" ] || continue
        _gvz_p=${_gvz_f##*/gvisorgen.}
        gvz_sweep "$_gvz_f" "${_gvz_p%%.*}" "*"
    done
}

# gvz_describe BASE NAME : one line per path of BASE/NAME (NAME itself and, for a folder, everything in it, sorted by
# path): its type, mode, owner, and a file's sha512 or a symlink's target. install-runsc writes these lines into the
# manifest of the binaries it moves aside; uninstall-runsc compares them with what it gave back.
gvz_describe() {
    (cd "$1" && find "$2" | sort) | while IFS= read -r _gvz_p; do
        _gvz_q=$1/$_gvz_p
        _gvz_s=$(stat -c '%a %u:%g' "$_gvz_q")
        if [ -L "$_gvz_q" ]; then
            printf 'link %s %s -> %s\n' "$_gvz_s" "$_gvz_p" "$(readlink "$_gvz_q")"
        elif [ -f "$_gvz_q" ]; then
            printf 'file %s %s %s\n' "$_gvz_s" "$(gvz_sha512 "$_gvz_q")" "$_gvz_p"
        elif [ -d "$_gvz_q" ]; then
            printf 'dir %s %s\n' "$_gvz_s" "$_gvz_p"
        else
            printf 'other %s %s %s\n' "$_gvz_s" "$(stat -c %F "$_gvz_q")" "$_gvz_p"
        fi
    done
}

# ---------------------------------------------------------------------------------------------------------------
# runsc.toml of an earlier install at another path (an older gvisorgen's /etc/containerd/runsc.toml)

# gvz_block_config_path FILE : the ConfigPath that gvisorgen's block in FILE names (empty when none).
gvz_block_config_path() {
    awk -v b="$GVZ_BEGIN" -v e="$GVZ_END" '$0 == b { i = 1; next } $0 == e { i = 0 }
        i && /^[ \t]*ConfigPath[ \t]*=/ { v = $0; sub(/^[^=]*=[ \t]*"/, "", v); sub(/".*/, "", v); print v; exit }' "$1"
}

# gvz_remove_moved_runsc_config OLD DIGEST : OLD (a host path named by the previous block) is removed when it is not
# RUNSC_CONFIG and is gvisorgen's own as recorded: in containerd's config folder, a plain file with the managed header
# whose digest is DIGEST (line 3 of the applied marker). A file edited since stays, and so does anything else.
gvz_remove_moved_runsc_config() {
    [ -n "$1" ] && [ "$1" != "$RUNSC_CONFIG" ] || return 0
    case $1 in
    "$GVZ_CFG_DIR"/*[!A-Za-z0-9._/-]* | *..* | *//*) gvz_log "the previous block named $1; not touching it" ;;
    "$GVZ_CFG_DIR"/*)
        if [ -f "$HOST_ROOT$1" ] && [ ! -L "$HOST_ROOT$1" ] &&
            head -n 1 "$HOST_ROOT$1" | grep -q '^# Managed by gvisorgen' &&
            [ "$(gvz_sha512 "$HOST_ROOT$1")" = "$2" ]; then
            rm -f "$HOST_ROOT$1"
            gvz_log "removed $1, the runsc.toml of the previous install (now $RUNSC_CONFIG)"
        elif [ -e "$HOST_ROOT$1" ]; then
            gvz_log "$1 (named by the previous block) is not gvisorgen's as recorded (edited since, or another writer's); left in place"
        fi
        ;;
    *) gvz_log "the previous block named $1, outside $GVZ_CFG_DIR; not touching it" ;;
    esac
}

# ---------------------------------------------------------------------------------------------------------------
# Compare-and-swap retries: a config changed by another writer between the read and the swap is read again, in a
# fresh run of the same script (nothing of the refused attempt is reused), at most GVZ_CAS_ATTEMPTS times in all.

GVZ_CAS_ATTEMPTS=3
GVZ_CAS_TRY=1

# gvz_cas_args "$@" : the script's own arguments; only --cas-attempt N (N >= 2, from gvz_cas_retry) is known.
gvz_cas_args() {
    [ $# -gt 0 ] || return 0
    if [ $# -eq 2 ] && [ "$1" = --cas-attempt ] && gvz_is_uint "$2" && [ "$2" -ge 2 ] && [ "$2" -le "$GVZ_CAS_ATTEMPTS" ]; then
        GVZ_CAS_TRY=$2
        return 0
    fi
    gvz_die "unknown arguments: $*"
}

# gvz_cas_retry : after the swap found the config changed: start over from the read (the lock released, scratch
# removed, the script run again in this process) while attempts remain; returns when none do.
gvz_cas_retry() {
    [ "$GVZ_CAS_TRY" -lt "$GVZ_CAS_ATTEMPTS" ] || return 0
    gvz_log "$CONTAINERD_CONFIG was changed by another writer while gvisorgen validated its edit (attempt $GVZ_CAS_TRY of $GVZ_CAS_ATTEMPTS): nothing written over it; starting over from the new file"
    trap - EXIT
    gvz_cleanup
    exec sh "$0" --cas-attempt "$((GVZ_CAS_TRY + 1))"
}

# ---------------------------------------------------------------------------------------------------------------
# Scratch space and cleanup

GVZ_TMP=
GVZ_CLEANUP_FILES=

gvz_cleanup() {
    for _f in $GVZ_CLEANUP_FILES; do rm -rf "$_f"; done
    [ -z "$GVZ_TMP" ] || rm -rf "$GVZ_TMP"
    gvz_unlock
}

gvz_setup_traps() {
    trap gvz_cleanup EXIT
    trap 'exit 129' HUP
    trap 'exit 130' INT
    trap 'exit 143' TERM
    # named with our pid: a killed run's scratch is recognised (gvz_clean_leftovers)
    GVZ_TMP=$(mktemp -d "${TMPDIR:-/tmp}/gvisorgen.$$.XXXXXX")
}

# gvz_atomic_write DEST_HOSTROOTED MODE < content : temp file in the same dir, chmod, rename.
gvz_atomic_write() {
    _t=${1%/*}/.${1##*/}.gvisorgen-tmp.$$
    GVZ_CLEANUP_FILES="$GVZ_CLEANUP_FILES $_t"
    cat >"$_t" || return 1
    chmod "$2" "$_t" || return 1
    mv -f "$_t" "$1"
}

# gvz_atomic_copy SRC DEST_HOSTROOTED MODE
gvz_atomic_copy() {
    _t=${2%/*}/.${2##*/}.gvisorgen-tmp.$$
    GVZ_CLEANUP_FILES="$GVZ_CLEANUP_FILES $_t"
    cp "$1" "$_t" || return 1
    chmod "$3" "$_t" || return 1
    mv -f "$_t" "$2"
}

# gvz_cas_replace SNAPSHOT SRC DEST_HOSTROOTED MODE : compare-and-swap. Stages SRC next to DEST (copy, chmod), then,
# immediately before the rename, checks that DEST still holds exactly the bytes of SNAPSHOT (SNAPSHOT "": that DEST
# still does not exist); status 3 without touching DEST when it does not (another writer changed it since it was
# read), 1 when staging or the rename fails. POSIX sh has no atomic compare-and-rename: a write that lands between
# the check (one cmp) and the rename (one mv) is still lost. Everything else (staging, chmod) happens before the check
# to keep that window as small as the shell allows.
gvz_cas_replace() {
    _t=${3%/*}/.${3##*/}.gvisorgen-tmp.$$
    GVZ_CLEANUP_FILES="$GVZ_CLEANUP_FILES $_t"
    cp "$2" "$_t" || return 1
    chmod "$4" "$_t" || return 1
    if [ -n "$1" ]; then
        cmp -s "$1" "$3" || { rm -f "$_t"; return 3; }
    else
        [ ! -e "$3" ] || { rm -f "$_t"; return 3; }
    fi
    mv -f "$_t" "$3"
}
