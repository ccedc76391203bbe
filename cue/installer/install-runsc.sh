#!/bin/sh
# install-runsc.sh: init container `install-runsc` of the gvisorgen runsc-installer DaemonSet.
#
# Downloads the gVisor release GVISOR_VERSION for this node's architecture from GVISOR_BASE_URL, verifies it
# (pinned sha512 from GVISOR_SHA512_PINS first, else the published .sha512 next to the artifact), and installs
# runsc, containerd-shim-runsc-v1 and, for archive releases, gvisor-bin/ into INSTALL_DIR on the host, each file
# atomically (temp file in the same dir, chmod 0755, rename), then writes the stamp INSTALL_DIR/.gvisorgen-runsc.stamp
# (tag, arch, layout, source digests, installed files' digests). Skips everything when the stamp matches and the
# installed files still verify. New binaries need no containerd restart. Installs nothing on any failure.
#
# Environment (set by the generator; see README.md for the whole contract):
#   HOST_ROOT (/host)  HOST_EXEC (nsenter -t 1 -m -u -i -n -p --)  GVISOR_MODE (install)
#   GVISOR_VERSION (YYYYMMDD or YYYYMMDD.N, required)  GVISOR_BASE_URL  GVISOR_LAYOUT (auto|binaries|archive)
#   GVISOR_SHA512_PINS ("<arch>/<artifact> <sha512>" lines)  INSTALL_DIR (/usr/local/bin)  STATE_DIR (/run/gvisorgen)
#   DOWNLOAD_TIMEOUT_SECONDS (60)  DOWNLOAD_RETRIES (3)  LOCK_TIMEOUT_SECONDS (300)
# Exit status: 0 installed (or already installed), non-zero with an ERROR line saying what failed.
set -eu
GVZ_NAME=install-runsc
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "${GVISORGEN_SCRIPTS:-/gvisorgen}/lib.sh"

# shellcheck disable=SC2086 # list of applet names
gvz_need_applets $GVZ_BASE_APPLETS wget tar bunzip2 uname find
gvz_load_env
[ "$GVISOR_MODE" = install ] || gvz_die "GVISOR_MODE is '$GVISOR_MODE': install-runsc runs only in install mode"
gvz_check_version
gvz_check_pins
ARCH=$(gvz_arch)
LAYOUT=$(gvz_layout)
IDIR=$HOST_ROOT$INSTALL_DIR
STAMP=$HOST_ROOT$GVZ_STAMP
URL=$GVISOR_BASE_URL/$GVISOR_VERSION/$ARCH

[ -d "$IDIR" ] || gvz_die "install dir $INSTALL_DIR is not mounted at $IDIR (the DaemonSet must mount it as a Directory hostPath)"

if [ "$LAYOUT" = archive ]; then ARTIFACTS=gvisor.tar.bz2; else ARTIFACTS="runsc containerd-shim-runsc-v1"; fi

gvz_setup_traps
gvz_lock

# --- already installed? ---------------------------------------------------------------------------------------------
# The stamp must name this tag, arch and layout; every pin must equal the recorded source digest; every installed
# file must still hash to its recorded digest. A published .sha512 is not fetched again for a tag already installed.
stamp_matches() {
    [ -f "$STAMP" ] || return 1
    [ "$(awk '$1 == "version" { print $2 }' "$STAMP")" = "$GVISOR_VERSION" ] || return 1
    [ "$(awk '$1 == "arch" { print $2 }' "$STAMP")" = "$ARCH" ] || return 1
    [ "$(awk '$1 == "layout" { print $2 }' "$STAMP")" = "$LAYOUT" ] || return 1
    for a in $ARTIFACTS; do
        p=$(gvz_pin "$ARCH" "$a")
        [ -z "$p" ] || [ "$(awk -v a="$a" '$1 == "source" && $2 == a { print $3 }' "$STAMP")" = "$p" ] || return 1
    done
    for f in runsc containerd-shim-runsc-v1; do
        p=$(gvz_pin "$ARCH" "$f")
        [ -z "$p" ] || [ "$(awk -v f="$f" '$1 == "file" && $3 == f { print $2 }' "$STAMP")" = "$p" ] || return 1
    done
    awk '$1 == "file" { print $2 "  " $3 }' "$STAMP" >"$GVZ_TMP/files.sha512"
    grep -q '  runsc$' "$GVZ_TMP/files.sha512" || return 1
    grep -q '  containerd-shim-runsc-v1$' "$GVZ_TMP/files.sha512" || return 1
    (cd "$IDIR" && sha512sum -c -s "$GVZ_TMP/files.sha512") >/dev/null 2>&1
}
if stamp_matches; then
    gvz_log "gVisor $GVISOR_VERSION ($ARCH, $LAYOUT) is already installed in $INSTALL_DIR and verifies; nothing to do"
    exit 0
fi

# The install dir must be writable before anything is downloaded (GKE COS: read-only /usr/local/bin).
probe=$IDIR/.gvisorgen-probe.$$
GVZ_CLEANUP_FILES="$GVZ_CLEANUP_FILES $probe"
if ! (: >"$probe") 2>/dev/null; then
    gvz_die "install dir $INSTALL_DIR is not writable (read-only filesystem?): set the install dir value to a writable host dir (e.g. /home/kubernetes/bin on GKE COS, with INSTALL_DIR_ON_PATH=false)"
fi
rm -f "$probe"

# --- download + verify ----------------------------------------------------------------------------------------------

# fetch URL DEST : bounded download with retries and exponential backoff; dies saying why.
fetch() {
    attempt=1
    delay=1
    while :; do
        rm -f "$2"
        if err=$(timeout "$DOWNLOAD_TIMEOUT_SECONDS" wget -q -O "$2" "$1" 2>&1); then
            return 0
        else
            rc=$?
        fi
        err=$(printf '%s' "$err" | tr '\n' ' ' | sed 's/[[:space:]]*$//')
        case "$rc:$err" in
        143:* | 124:*) why="timed out after ${DOWNLOAD_TIMEOUT_SECONDS}s" ;;
        *"HTTP/"*" 404"* | *" 404 Not Found"*) gvz_die "$1: not found (HTTP 404): is $GVISOR_VERSION a real release, and is the layout right (GVISOR_LAYOUT=$GVISOR_LAYOUT resolved to $LAYOUT)?" ;;
        *"onnection refused"*) why="connection refused" ;;
        *"server returned error"*) why="server error: ${err#*server returned error: }" ;;
        *) why="wget exit $rc: ${err:-no message}" ;;
        esac
        if [ "$attempt" -ge "$DOWNLOAD_RETRIES" ]; then
            rm -f "$2"
            gvz_die "download of $1 failed after $attempt attempt(s): $why"
        fi
        gvz_log "download of $1 failed ($why); retry $attempt/$((DOWNLOAD_RETRIES - 1)) in ${delay}s"
        sleep "$delay"
        attempt=$((attempt + 1))
        delay=$((delay * 2))
    done
}

# verify ARTIFACT FILE : prints the verified digest; pin wins over the published .sha512.
verify() {
    want=$(gvz_pin "$ARCH" "$1")
    if [ -n "$want" ]; then
        src="pinned digest"
    else
        fetch "$URL/$1.sha512" "$GVZ_TMP/$1.sha512"
        want=$(awk 'NR == 1 { print tolower($1) }' "$GVZ_TMP/$1.sha512")
        gvz_is_sha512 "$want" || gvz_die "$URL/$1.sha512 does not hold a sha512 digest"
        src="published $1.sha512"
    fi
    got=$(gvz_sha512 "$2")
    if [ "$got" != "$want" ]; then
        gvz_die "sha512 mismatch for $URL/$1 against the $src (truncated, corrupted or tampered download; $(wc -c <"$2") bytes): want $want got $got"
    fi
    gvz_log "verified $1 ($src)"
    echo "$got"
}

mkdir -p "$GVZ_TMP/dl" "$GVZ_TMP/x"
sources=""
for a in $ARTIFACTS; do
    gvz_log "downloading $URL/$a"
    fetch "$URL/$a" "$GVZ_TMP/dl/$a"
    digest=$(verify "$a" "$GVZ_TMP/dl/$a") || exit 1
    sources="$sources
source $a $digest"
done

# --- stage the files to install -------------------------------------------------------------------------------------
stage=$GVZ_TMP/x
if [ "$LAYOUT" = archive ]; then
    tar -tjf "$GVZ_TMP/dl/gvisor.tar.bz2" >"$GVZ_TMP/list" 2>"$GVZ_TMP/tar.err" || gvz_die "gvisor.tar.bz2 is not a readable bzip2 tar: $(head -c 300 "$GVZ_TMP/tar.err")"
    # busybox tar strips leading '/' and '../' (and says so): refuse such an archive instead of trusting the repair.
    if grep -qE '^/|(^|/)\.\.(/|$)' "$GVZ_TMP/list" || grep -qi 'removing leading' "$GVZ_TMP/tar.err"; then
        gvz_die "gvisor.tar.bz2 holds absolute or '..' paths; refusing to unpack it"
    fi
    tar -xjf "$GVZ_TMP/dl/gvisor.tar.bz2" -C "$GVZ_TMP/x" || gvz_die "cannot unpack gvisor.tar.bz2"
    if [ ! -f "$stage/runsc" ]; then
        stage=$(find "$GVZ_TMP/x" -mindepth 2 -maxdepth 2 -type f -name runsc | head -n 1)
        [ -n "$stage" ] || gvz_die "gvisor.tar.bz2 holds no runsc"
        stage=${stage%/runsc}
    fi
    [ -f "$stage/containerd-shim-runsc-v1" ] || gvz_die "gvisor.tar.bz2 holds no containerd-shim-runsc-v1 next to runsc"
    [ -d "$stage/gvisor-bin" ] || gvz_die "gvisor.tar.bz2 holds no gvisor-bin/ next to runsc"
    if find "$stage/gvisor-bin" ! -type f ! -type d | grep -q .; then
        gvz_die "gvisor.tar.bz2's gvisor-bin/ holds something other than files and folders; refusing"
    fi
else
    cp "$GVZ_TMP/dl/runsc" "$GVZ_TMP/dl/containerd-shim-runsc-v1" "$stage/"
fi
# Pins for the binaries themselves also hold for the ones inside an archive.
if [ "$LAYOUT" = archive ]; then
    for f in runsc containerd-shim-runsc-v1; do
        p=$(gvz_pin "$ARCH" "$f")
        [ -z "$p" ] || [ "$(gvz_sha512 "$stage/$f")" = "$p" ] || gvz_die "sha512 mismatch for $f inside gvisor.tar.bz2 against the pinned digest of $ARCH/$f"
    done
fi
[ -s "$stage/runsc" ] || gvz_die "runsc is empty"
[ -s "$stage/containerd-shim-runsc-v1" ] || gvz_die "containerd-shim-runsc-v1 is empty"

# Helpers first, then the shim, runsc last: a sandbox started meanwhile never sees a runsc without its helpers.
(cd "$stage" && { [ ! -d gvisor-bin ] || find gvisor-bin -type f | sort; } && echo containerd-shim-runsc-v1 && echo runsc) >"$GVZ_TMP/install.list"

# --- install, atomically per file -----------------------------------------------------------------------------------
files=""
while IFS= read -r f; do
    case $f in */*) mkdir -p "$IDIR/${f%/*}" || gvz_die "cannot create $INSTALL_DIR/${f%/*}" ;; esac
    gvz_atomic_copy "$stage/$f" "$IDIR/$f" 0755 || gvz_die "cannot install $INSTALL_DIR/$f"
    files="$files
file $(gvz_sha512 "$stage/$f") $f"
done <"$GVZ_TMP/install.list"

# gvisor-bin files that an older install left and this release no longer has.
if [ -f "$STAMP" ]; then
    awk '$1 == "file" && $3 ~ /^gvisor-bin\// { print $3 }' "$STAMP" | while IFS= read -r old; do
        grep -qxF "$old" "$GVZ_TMP/install.list" || rm -f "$IDIR/$old"
    done
fi
if [ "$LAYOUT" = binaries ] && [ -d "$IDIR/gvisor-bin" ] && [ -f "$STAMP" ]; then
    rmdir "$IDIR/gvisor-bin" 2>/dev/null || true
fi

{
    echo "# gvisorgen: what is installed in $INSTALL_DIR (written last by install-runsc). Do not edit."
    echo "version $GVISOR_VERSION"
    echo "arch $ARCH"
    echo "layout $LAYOUT"
    printf '%s\n' "$sources" | sed '/^$/d'
    printf '%s\n' "$files" | sed '/^$/d'
} | gvz_atomic_write "$STAMP" 0644 || gvz_die "cannot write the stamp $GVZ_STAMP"

gvz_log "installed gVisor $GVISOR_VERSION ($ARCH, $LAYOUT) into $INSTALL_DIR: runsc $(awk '$1 == "file" && $3 == "runsc" { print substr($2, 1, 16) }' "$STAMP")..."
