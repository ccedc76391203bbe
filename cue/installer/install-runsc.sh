#!/bin/sh
# install-runsc.sh: init container `install-runsc` of the gvisorgen runsc-installer DaemonSet.
#
# Downloads the gVisor release GVISOR_VERSION for this node's architecture from GVISOR_BASE_URL, verifies it, and installs
# it into a folder of its own, INSTALL_DIR/gvisor-releases/<version>/ (runsc, containerd-shim-runsc-v1 and, for archive
# releases, gvisor-bin/), filled under a temp name and renamed into place whole; then replaces the shim in INSTALL_DIR
# (where containerd finds it) by rename, and writes the stamp INSTALL_DIR/.gvisorgen-runsc.stamp last (the current
# release: tag, arch, layout, sources; every release on the node: its files' digests and sources). configure-containerd
# then points runsc.toml at the new release: new sandboxes get it without a containerd restart, running ones keep the
# runsc that started them. Older releases stay while a sandbox uses them (asked of their own runsc and the host's
# processes: releases.sh) and are removed by a later run once none does, never by the run that switches away from
# them; past KEEP_OLD_RELEASES of them in use, a new release is refused before any download. Skips the download when
# the stamp names this release as current and its files still verify, or switches back without one to a kept release
# that verifies (a rollback). A failure before the release is verified and staged changes nothing in INSTALL_DIR but
# the removal of unused old releases. Before the first file is written, INSTALL_DIR/.gvisorgen-runsc.installing names
# what this run installs (removed after the stamp): a run killed half-way leaves files that the next run (which
# installs again) and uninstall still know as gvisorgen's.
#
# Binaries gvisorgen did not install: runsc, containerd-shim-runsc-v1 or gvisor-bin/ in INSTALL_DIR that neither the
# stamp nor .gvisorgen-runsc.installing names (a hand install from gVisor's quick start, another tool's) are never
# written over. ADOPT_FOREIGN_RUNSC=false (the default): refused before anything is downloaded or written, naming
# each one. ADOPT_FOREIGN_RUNSC=true: the whole install is taken over, never mixed: once the release is downloaded and
# verified, every foreign one is moved aside (rename, same filesystem) into INSTALL_DIR/.gvisorgen-foreign/, whose
# manifest records the type, mode, owner and sha512 of everything moved (the folder is made under a temp name with
# its manifest, then renamed), with a WARNING; then the release is installed as usual. uninstall gives them back.
#
# Trust rule: an artifact is installed only if (a) its sha512 is pinned in GVISOR_SHA512_PINS (then busybox wget may
# fetch it from anywhere, http:// included), or (b) it and its published .sha512 were fetched over TLS whose chain and
# host name were verified: by the host's curl through HOST_EXEC_NET (https only, the host's CA store or GVISOR_CA_BUNDLE),
# streamed into this container. busybox wget does not verify certificates, so a .sha512 it fetched proves nothing.
# Anything else (unpinned over http://, no curl on the host, a certificate curl rejects) is refused; no value relaxes it.
#
# Environment (set by the generator; see README.md for the whole contract):
#   HOST_ROOT (/host)  HOST_EXEC (nsenter -t 1 -m --)  HOST_EXEC_NET (nsenter -t 1 -m -n --, curl only)
#   GVISOR_MODE (install)
#   GVISOR_VERSION (YYYYMMDD or YYYYMMDD.N, required)  GVISOR_BASE_URL  GVISOR_LAYOUT (auto|binaries|archive)
#   GVISOR_SHA512_PINS ("<arch>/<artifact> <sha512>" lines)  GVISOR_CA_BUNDLE (PEM, empty: the host's CA store)
#   CONTAINERD_MIN_VERSION (the oldest containerd that can start this release's shim; empty: any)
#   HOST_PATH  INSTALL_DIR (/usr/local/bin)  STATE_DIR (/run/gvisorgen; also holds the CA bundle for curl while it runs)
#   ADOPT_FOREIGN_RUNSC (false: refuse binaries gvisorgen did not install; true: move them aside and take over)
#   DOWNLOAD_TIMEOUT_SECONDS (60)  DOWNLOAD_RETRIES (3)  LOCK_TIMEOUT_SECONDS (300)  KEEP_OLD_RELEASES (3)
# Exit status: 0 installed (or already installed), non-zero with an ERROR line saying what failed.
set -eu
GVZ_NAME=install-runsc
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "${GVISORGEN_SCRIPTS:-/gvisorgen}/lib.sh"
# shellcheck source-path=SCRIPTDIR source=releases.sh
. "${GVISORGEN_SCRIPTS:-/gvisorgen}/releases.sh"

# shellcheck disable=SC2086 # list of applet names
gvz_need_applets $GVZ_BASE_APPLETS wget tar bunzip2 uname find
gvz_load_env
[ "$GVISOR_MODE" = install ] || gvz_die "GVISOR_MODE is '$GVISOR_MODE': install-runsc runs only in install mode"
gvz_check_version
gvz_check_pins
# Before anything is downloaded or installed: a shim this node's containerd cannot start would fail every gVisor pod.
gvz_check_containerd_floor
ARCH=$(gvz_arch)
LAYOUT=$(gvz_layout)
IDIR=$HOST_ROOT$INSTALL_DIR
STAMP=$HOST_ROOT$GVZ_STAMP
REL=$HOST_ROOT$GVZ_RELEASES
V=$GVISOR_VERSION
VDIR=$GVZ_RELEASES_NAME/$V
URL=$GVISOR_BASE_URL/$GVISOR_VERSION/$ARCH

[ -d "$IDIR" ] || gvz_die "install dir $INSTALL_DIR is not mounted at $IDIR (the DaemonSet must mount it as a Directory hostPath)"

if [ "$LAYOUT" = archive ]; then ARTIFACTS=gvisor.tar.bz2; else ARTIFACTS="runsc containerd-shim-runsc-v1"; fi

gvz_setup_traps
gvz_lock

# --- binaries gvisorgen did not install -----------------------------------------------------------------------------
# gvisorgen's own are the files its stamp names, and those of an install under way (INSTALLING: written before the
# first file is installed, removed after the stamp, so a run killed in between leaves files still known as ours).
# runsc, the shim or gvisor-bin/ (a symlink, or a folder in which no named file lives and which holds more than empty
# folders) that neither names are foreign.
INSTALLING=$IDIR/.gvisorgen-runsc.installing
ASIDE=$IDIR/.gvisorgen-foreign


# is_empty_dir DIR : DIR holds nothing.
is_empty_dir() {
    for _e in "$1"/* "$1"/.*; do
        case ${_e##*/} in . | ..) continue ;; esac
        if [ -e "$_e" ] || [ -L "$_e" ]; then return 1; fi
    done
    return 0
}

OURS=$GVZ_TMP/ours
cat "$STAMP" "$INSTALLING" 2>/dev/null | awk '$1 == "file" { print $3 }' | sort -u >"$OURS"
FOREIGN=""
for n in runsc containerd-shim-runsc-v1 gvisor-bin; do
    if [ ! -e "$IDIR/$n" ] && [ ! -L "$IDIR/$n" ]; then continue; fi
    if [ "$n" = gvisor-bin ]; then
        if [ ! -L "$IDIR/$n" ] && grep -q '^gvisor-bin/' "$OURS"; then continue; fi
        # a folder with nothing but (empty) folders in it holds no binary to keep apart from gvisorgen's
        if [ ! -L "$IDIR/$n" ] && ! find "$IDIR/$n" ! -type d | grep -q .; then continue; fi
    elif grep -qxF "$n" "$OURS"; then
        continue
    fi
    FOREIGN="$FOREIGN $n"
done
FOREIGN=${FOREIGN# }
# gvisorgen-runsc is gvisorgen's own name: a file of that name neither list names is not taken over, whatever
# ADOPT_FOREIGN_RUNSC says (nothing to give back to: no install of another tool's has it).
if { [ -e "$IDIR/$GVZ_DISPATCH_NAME" ] || [ -L "$IDIR/$GVZ_DISPATCH_NAME" ]; } && ! grep -qxF "$GVZ_DISPATCH_NAME" "$OURS"; then
    gvz_die "$GVZ_DISPATCH exists and gvisorgen did not write it (neither its stamp nor its install record names it): refusing to write over it; move it away (nothing was downloaded or changed)"
fi
# What gvisorgen-runsc is on this node: the same bytes for every release, rewritten only when they differ.
gvz_dispatcher_text >"$GVZ_TMP/dispatch"
DISPATCH_SUM=$(gvz_sha512 "$GVZ_TMP/dispatch")
SHOWN=""
for n in $FOREIGN; do
    if [ "$n" = gvisor-bin ]; then SHOWN="$SHOWN, $INSTALL_DIR/$n/"; else SHOWN="$SHOWN, $INSTALL_DIR/$n"; fi
done
SHOWN=${SHOWN#, }
if [ -n "$FOREIGN" ]; then
    if [ "$ADOPT_FOREIGN_RUNSC" != true ]; then
        gvz_die "$INSTALL_DIR already holds $SHOWN, which gvisorgen did not install (its stamp $GVZ_STAMP does not name them: a hand install such as gVisor's quick start, or another tool's): refusing to write over them or to mix them with gvisorgen's; nothing was downloaded or changed. Either remove them (and any containerd runtime that uses them), or set gvisor.host.adoptForeignRunsc: true (ADOPT_FOREIGN_RUNSC=true) to let gvisorgen take the install over: it moves them aside into $INSTALL_DIR/.gvisorgen-foreign/ and uninstall gives them back"
    fi
    # Can they be moved aside? Into a new folder, or one that an earlier, killed takeover made and recorded them in
    # (then only what it had not moved yet is left). Anything else is refused now, before the download.
    if [ -e "$ASIDE" ] || [ -L "$ASIDE" ]; then
        if [ -L "$ASIDE" ] || [ ! -d "$ASIDE" ]; then
            gvz_die "cannot take over $SHOWN: $INSTALL_DIR/.gvisorgen-foreign exists and is not a folder gvisorgen made; move it away (nothing was downloaded or changed)"
        fi
        if [ -f "$ASIDE/manifest" ]; then
            for n in $FOREIGN; do
                if ! grep -qxF "moved $n" "$ASIDE/manifest" || [ -e "$ASIDE/$n" ] || [ -L "$ASIDE/$n" ]; then
                    gvz_die "cannot take over $INSTALL_DIR/$n: an earlier takeover already moved a foreign install aside into $INSTALL_DIR/.gvisorgen-foreign/ (see its manifest), and gvisorgen keeps one only; remove $INSTALL_DIR/$n, or give that one back first (uninstall); nothing was downloaded or changed"
                fi
            done
        elif ! is_empty_dir "$ASIDE"; then
            gvz_die "cannot take over $SHOWN: $INSTALL_DIR/.gvisorgen-foreign holds files but no manifest (not gvisorgen's as made); move it away (nothing was downloaded or changed)"
        fi
    fi
    gvz_log "ADOPT_FOREIGN_RUNSC=true: $SHOWN, which gvisorgen did not install, will be moved aside once the release is downloaded and verified"
fi

# --- the releases folder ------------------------------------------------------------------------------------------
if [ -e "$REL" ] || [ -L "$REL" ]; then
    if [ -L "$REL" ] || [ ! -d "$REL" ]; then
        gvz_die "$GVZ_RELEASES exists and is not a folder (a symlink or a file): gvisorgen keeps its releases there and does not write through it; move it away (nothing was downloaded or changed)"
    fi
fi
# This release's folder, when there, must be gvisorgen's (its stamp, or the record of an install that did not finish).
if [ -e "$REL/$V" ] || [ -L "$REL/$V" ]; then
    if [ -L "$REL/$V" ] || [ ! -d "$REL/$V" ] || ! grep -q "^$VDIR/" "$OURS"; then
        gvz_die "$GVZ_RELEASES/$V exists and gvisorgen did not make it (neither its stamp nor its install record names it): refusing to write over it or to use it; move it away (nothing was downloaded or changed)"
    fi
fi

# --- old releases: kept while used, then collected ------------------------------------------------------------------
# A release other than this one is removed once no sandbox uses it: asked of its own runsc (the containers in its state
# root, stopped ones included) and of the host's processes. Never the release this run switches away from (the stamp's
# current one, and the one runsc.toml names until configure-containerd rewrites it): a container whose shim read
# runsc.toml just before the switch may be starting with it right now. The next run collects it.
PREV=$(awk '$1 == "version" { print $2; exit }' "$STAMP" 2>/dev/null || true)
if [ -z "$PREV" ] || ! grep -q "^file [0-9a-f]* $GVZ_RELEASES_NAME/$PREV/" "$STAMP"; then
    PREV=$(gvz_rel_list "$STAMP" | grep -x legacy || true) # a stamp of the unversioned install
fi
TOML_REL=$(gvz_rel_named_by_toml)
OLD_USED=""
for r in $(gvz_rel_list "$STAMP"); do
    [ "$r" != "$V" ] || continue
    if grep -qx "collecting $r" "$STAMP"; then
        gvz_log "finishing the removal of $(gvz_rel_show "$r") (an earlier run judged it unused)"
        gvz_rel_collect "$STAMP" "$r"
        continue
    fi
    if users=$(gvz_rel_users "$r"); then
        OLD_USED="$OLD_USED $r"
        gvz_log "keeping $(gvz_rel_show "$r"): still used ($(printf '%s\n' "$users" | head -n 5 | tr '\n' ';' | sed 's/;$//; s/;/; /g'))"
    elif [ "$r" = "$PREV" ] || [ "$r" = "$TOML_REL" ]; then
        gvz_log "keeping $(gvz_rel_show "$r") until the next run: this run switches away from it"
    else
        gvz_rel_collect "$STAMP" "$r"
        gvz_log "removed $(gvz_rel_show "$r"): no sandbox uses it any more"
    fi
done
OLD_USED=${OLD_USED# }

# --- already installed? ---------------------------------------------------------------------------------------------
# rel_verifies: this release's folder is recorded in the stamp with every artifact's source (each pin equal to the
# recorded source digest, an unpinned one verified: pinned or verified-tls), the pins of runsc and the shim equal to
# their recorded digests, and every recorded file still hashes to its digest. Then it can serve again without a
# download (a rollback to a release still on the node). stamp_matches: it is also the current one, and the shim in
# INSTALL_DIR is its shim. A published .sha512 is not fetched again for a release already installed.
rel_verifies() {
    [ -f "$STAMP" ] || return 1
    ! grep -qx "collecting $V" "$STAMP" || return 1
    [ "$(awk '$1 == "arch" { print $2 }' "$STAMP")" = "$ARCH" ] || return 1
    for a in $ARTIFACTS; do
        p=$(gvz_pin "$ARCH" "$a")
        src=$(awk -v v="$V" -v a="$a" '$1 == "rsource" && $2 == v && $3 == a { print $4 " " $5 }' "$STAMP")
        [ -n "$src" ] || return 1
        if [ -n "$p" ]; then
            [ "${src% *}" = "$p" ] || return 1
        else
            case ${src#* } in pinned | verified-tls) ;; *) return 1 ;; esac
        fi
    done
    for f in runsc containerd-shim-runsc-v1; do
        p=$(gvz_pin "$ARCH" "$f")
        [ -z "$p" ] || [ "$(awk -v f="$VDIR/$f" '$1 == "file" && $3 == f { print $2 }' "$STAMP")" = "$p" ] || return 1
    done
    awk -v d="$VDIR/" '$1 == "file" && index($3, d) == 1 { print $2 "  " $3 }' "$STAMP" >"$GVZ_TMP/rel.sha512"
    grep -q "  $VDIR/runsc\$" "$GVZ_TMP/rel.sha512" || return 1
    grep -q "  $VDIR/containerd-shim-runsc-v1\$" "$GVZ_TMP/rel.sha512" || return 1
    (cd "$IDIR" && sha512sum -c -s "$GVZ_TMP/rel.sha512") >/dev/null 2>&1
}
stamp_matches() {
    [ "$(awk '$1 == "version" { print $2 }' "$STAMP")" = "$V" ] || return 1
    [ "$(awk '$1 == "layout" { print $2 }' "$STAMP")" = "$LAYOUT" ] || return 1
    _shim=$(awk -v f="$VDIR/containerd-shim-runsc-v1" '$1 == "file" && $3 == f { print $2 }' "$STAMP")
    [ "$(awk '$1 == "file" && $3 == "containerd-shim-runsc-v1" { print $2 }' "$STAMP")" = "$_shim" ] || return 1
    [ -f "$IDIR/containerd-shim-runsc-v1" ] && [ "$(gvz_sha512 "$IDIR/containerd-shim-runsc-v1")" = "$_shim" ] || return 1
    [ "$(awk -v f="$GVZ_DISPATCH_NAME" '$1 == "file" && $3 == f { print $2 }' "$STAMP")" = "$DISPATCH_SUM" ] || return 1
    [ -f "$IDIR/$GVZ_DISPATCH_NAME" ] && [ ! -L "$IDIR/$GVZ_DISPATCH_NAME" ] && cmp -s "$GVZ_TMP/dispatch" "$IDIR/$GVZ_DISPATCH_NAME"
}
# Not with foreign binaries to take over, nor after an install that did not finish (its record is still there: files
# it installed that this stamp does not name would be left over).
# The current files' identities on disk (gvz_seen), taken before rel_verifies and stamp_matches hash them: when they
# verify and the stamp's "seen" lines differ (a stamp from before them, a disk renumbered by a reboot, a touch), the
# stamp gets these, so that the readiness probe stops hashing them.
REUSE=
cur_seen=
if [ "$PREV" = "$V" ]; then
    # shellcheck disable=SC2046 # the stamp's paths: no blanks (gVisor's own file names)
    cur_seen=$(gvz_seen "$IDIR" $(gvz_current_files "$STAMP" "$V" | awk '{ print $2 }') 2>/dev/null) || cur_seen=
fi
if [ -z "$FOREIGN" ] && [ ! -e "$INSTALLING" ] && rel_verifies; then
    if stamp_matches; then
        if [ -n "$cur_seen" ] && [ "$cur_seen" != "$(awk '$1 == "seen"' "$STAMP")" ]; then
            { awk '$1 != "seen"' "$STAMP" && printf '%s\n' "$cur_seen"; } | gvz_atomic_write "$STAMP" 0644 || gvz_die "cannot write the stamp $GVZ_STAMP"
            gvz_log "recorded the installed files' identities on disk in the stamp (the readiness probe hashes a file again only when its identity changes)"
        fi
        gvz_log "gVisor $V ($ARCH, $LAYOUT) is already installed in $GVZ_RELEASES/$V and verifies; nothing to do"
        exit 0
    fi
    REUSE=1
fi
if [ -e "$INSTALLING" ]; then gvz_log "an earlier install did not finish ($GVZ_STAMP not written): installing again"; fi

# --- at most KEEP_OLD_RELEASES old releases in use ------------------------------------------------------------------
# Each costs its size on disk (runsc, the shim, sidecars: about a hundred MB) and stays until its last sandbox goes.
# Past the bound, the new release is refused here, before any download, naming what holds the old ones: the DaemonSet's
# rollout stops at this node (its pod is never Ready), and the node keeps serving its current release.
used_after=$(echo "$OLD_USED" | tr ' ' '\n' | grep -vx -- "$V" | grep . | tr '\n' ' ' | sed 's/ $//' || true)
n_after=$(echo "$used_after" | wc -w)
if [ "$n_after" -gt "$KEEP_OLD_RELEASES" ]; then
    gvz_die "refusing to install gVisor $V: $n_after older release(s) on this node still serve sandboxes ($used_after), more than KEEP_OLD_RELEASES=$KEEP_OLD_RELEASES (gvisor.release.keepOld); nothing was downloaded or changed, and the node keeps serving $(gvz_rel_show "${PREV:-legacy}"). Delete (or let finish) the gVisor pods started before the last bumps on this node, or raise gvisor.release.keepOld; the installer retries by itself"
fi

if [ -z "$REUSE" ]; then
    # --- trust: a pin, or a verifying download ---------------------------------------------------------------------------
    WAYS_OUT="pin its sha512 (gvisorgen pin, or gvisor.release.sha512.$ARCH.<artifact> in values: GVISOR_SHA512_PINS), or download it over verified TLS (an https:// base URL whose certificate chain and host name the host's curl verifies against the host's CA store or gvisor.release.caBundle: GVISOR_CA_BUNDLE)"
    UNPINNED=""
    for a in $ARTIFACTS; do
        [ -n "$(gvz_pin "$ARCH" "$a")" ] || UNPINNED="$UNPINNED $a"
    done
    UNPINNED=${UNPINNED# }
    CURL_CACERT=""
    if [ -n "$UNPINNED" ]; then
        case $GVISOR_BASE_URL in
        https://*) ;;
        *) gvz_die "refusing to install $UNPINNED from $URL: not pinned, and a plain http:// download cannot be verified; either $WAYS_OUT" ;;
        esac
        # shellcheck disable=SC2086 # GVZ_HXN (HOST_EXEC_NET + env PATH=HOST_PATH) is a command prefix, split on purpose
        if ! cv=$(timeout 30 $GVZ_HXN curl --version 2>&1); then
            gvz_die "refusing to install $UNPINNED from $URL: not pinned, and the host has no working curl to download it over verified TLS (busybox wget does not verify certificates): $(printf '%s' "$cv" | head -n 1 | head -c 200); either $WAYS_OUT"
        fi
        if [ -n "$GVISOR_CA_BUNDLE" ]; then
            # The host's curl reads the bundle from a host path: STATE_DIR is mounted at the same path under HOST_ROOT.
            # Public certificates only; removed on exit (those of killed runs: gvz_clean_leftovers, under the lock).
            ca=$STATE_DIR/.gvisorgen-ca.$$.pem
            GVZ_CLEANUP_FILES="$GVZ_CLEANUP_FILES $HOST_ROOT$ca"
            printf '%s\n' "$GVISOR_CA_BUNDLE" >"$HOST_ROOT$ca" || gvz_die "cannot write the CA bundle to $ca"
            CURL_CACERT="--cacert $ca"
        fi
        gvz_log "not pinned: $UNPINNED; downloading with the host's $(printf '%s' "$cv" | head -n 1 | cut -d' ' -f1-2), TLS verified against $([ -n "$CURL_CACERT" ] && echo "GVISOR_CA_BUNDLE" || echo "the host's CA store")"
    fi
fi

# The install dir must be writable before anything is downloaded (GKE COS: read-only /usr/local/bin). A probe a killed
# run left is removed by the next run (gvz_clean_leftovers, under the lock).
probe=$IDIR/.gvisorgen-probe.$$
GVZ_CLEANUP_FILES="$GVZ_CLEANUP_FILES $probe"
if ! (: >"$probe") 2>/dev/null; then
    gvz_die "install dir $INSTALL_DIR is not writable (read-only filesystem?): set the install dir value to a writable host dir (e.g. /home/kubernetes/bin on GKE COS, with INSTALL_DIR_ON_PATH=false)"
fi
rm -f "$probe"

# --- download + verify ----------------------------------------------------------------------------------------------

# fetch URL DEST [curl] : bounded download with retries and exponential backoff; dies saying why. With "curl", the
# host's curl fetches it: https only (redirects too), TLS 1.2+, chain and host name verified, streamed to our stdout so
# nothing is written on the host. A certificate curl rejects is not retried.
fetch() {
    attempt=1
    delay=1
    while :; do
        rm -f "$2"
        if [ "${3:-}" = curl ]; then
            # Our timeout is a backstop only: curl's --max-time ends curl itself (nsenter may fork it).
            # shellcheck disable=SC2086 # GVZ_HXN and CURL_CACERT are split on purpose
            if err=$(timeout "$((DOWNLOAD_TIMEOUT_SECONDS + 5))" $GVZ_HXN curl -fsS -L --proto =https --proto-redir =https \
                --tlsv1.2 --max-time "$DOWNLOAD_TIMEOUT_SECONDS" $CURL_CACERT "$1" 2>&1 >"$2"); then
                return 0
            else
                rc=$?
            fi
            # curl's first line says what failed; the rest is advice to browse its web site.
            err=$(printf '%s\n' "$err" | head -n 1 | sed 's/[[:space:]]*More details here:.*//; s/[[:space:]]*$//')
            case "$rc:$err" in
            143:* | 124:* | 28:*) why="timed out after ${DOWNLOAD_TIMEOUT_SECONDS}s" ;;
            22:*" 404"*) gvz_die "$1: not found (HTTP 404): is $GVISOR_VERSION a real release, and is the layout right (GVISOR_LAYOUT=$GVISOR_LAYOUT resolved to $LAYOUT)?" ;;
            22:*) why="server error: ${err#curl: (22) }" ;;
            7:*) why="cannot connect: $err" ;;
            # 35 handshake, 51/60 certificate or host name (51 merged into 60 in curl 7.62), 58/77 local
            # certificate or CA file, the others further TLS setup failures: a refusal, not a retry.
            35:* | 51:* | 53:* | 54:* | 58:* | 59:* | 60:* | 64:* | 66:* | 77:* | 80:* | 82:* | 83:* | 90:* | 91:*)
                rm -f "$2"
                gvz_die "TLS verification of $1 failed (host curl exit $rc: $err); it is not pinned, so it is refused: either $WAYS_OUT"
                ;;
            1:*)
                rm -f "$2"
                gvz_die "host curl refused $1 (exit 1, a redirect to a non-https URL?): $err; either $WAYS_OUT"
                ;;
            *) why="host curl exit $rc: ${err:-no message}" ;;
            esac
        else
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
        fi
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

# verify ARTIFACT FILE : prints "<verified digest> <how>". A pin wins; else the published .sha512, which counts only
# because it came over verified TLS (fetched by the host's curl, as the artifact was).
verify() {
    want=$(gvz_pin "$ARCH" "$1")
    if [ -n "$want" ]; then
        src="pinned digest"
        how=pinned
    else
        fetch "$URL/$1.sha512" "$GVZ_TMP/$1.sha512" curl
        want=$(awk 'NR == 1 { print tolower($1) }' "$GVZ_TMP/$1.sha512")
        gvz_is_sha512 "$want" || gvz_die "$URL/$1.sha512 does not hold a sha512 digest"
        src="published $1.sha512 over verified TLS"
        how=verified-tls
    fi
    got=$(gvz_sha512 "$2")
    if [ "$got" != "$want" ]; then
        gvz_die "sha512 mismatch for $URL/$1 against the $src (truncated, corrupted or tampered download; $(wc -c <"$2") bytes): want $want got $got"
    fi
    gvz_log "verified $1 ($src)"
    echo "$got $how"
}

# KNOWN: "<name> <sha512>" lines of staged files whose bytes this run hashed already (a verified download renamed into
# the stage, a binary the archive's pins checked), so that each release file is hashed once before it is installed and
# once as installed, not three times (each hash of a ~200 MB release is seconds of CPU on a small node).
nl='
'
KNOWN=$nl
# staged_sum NAME : sets SUM to the sha512 of $stage/NAME, from KNOWN or hashed now.
staged_sum() {
    case $KNOWN in
    *"$nl$1 "*)
        SUM=${KNOWN#*"$nl$1 "}
        SUM=${SUM%%"$nl"*}
        ;;
    *) SUM=$(gvz_sha512 "$stage/$1") ;;
    esac
}

if [ -z "$REUSE" ]; then
    mkdir -p "$GVZ_TMP/dl" "$GVZ_TMP/x"
    sources=""
    for a in $ARTIFACTS; do
        if [ -n "$(gvz_pin "$ARCH" "$a")" ]; then
            gvz_log "downloading $URL/$a (pinned: busybox wget)"
            fetch "$URL/$a" "$GVZ_TMP/dl/$a"
        else
            gvz_log "downloading $URL/$a (not pinned: host curl, verified TLS)"
            fetch "$URL/$a" "$GVZ_TMP/dl/$a" curl
        fi
        digest=$(verify "$a" "$GVZ_TMP/dl/$a") || exit 1
        sources="$sources
    source $a $digest"
        # the binaries layout stages the downloads themselves (an archive's digest is of no staged file)
        [ "$LAYOUT" = archive ] || KNOWN="$KNOWN$a ${digest%% *}$nl"
    done

    # --- stage the files to install -------------------------------------------------------------------------------------
    stage=$GVZ_TMP/x
    if [ "$LAYOUT" = archive ]; then
        # One pass: unpacked into this run's private folder (removed on exit), its names listed as it goes (-v), and
        # judged before anything leaves that folder. Listing first (-t) decompressed the archive twice: ~5 s of CPU per
        # install for a 61 MB release on a slow node.
        tar -xvjf "$GVZ_TMP/dl/gvisor.tar.bz2" -C "$GVZ_TMP/x" >"$GVZ_TMP/list" 2>"$GVZ_TMP/tar.err" || gvz_die "gvisor.tar.bz2 is not a readable bzip2 tar: $(head -c 300 "$GVZ_TMP/tar.err")"
        # busybox tar strips leading '/' and '../' (and says so): refuse such an archive instead of trusting the repair.
        if grep -qE '^/|(^|/)\.\.(/|$)' "$GVZ_TMP/list" || grep -qi 'removing leading' "$GVZ_TMP/tar.err"; then
            gvz_die "gvisor.tar.bz2 holds absolute or '..' paths; refusing to unpack it"
        fi
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
        # runsc boots each sandbox with gvisor-bin/gvisor_sentry when it finds it next to itself; without it, runsc falls
        # back to booting with itself, which runsc deprecates (STRICT by default after 2026-09, no fallback after 2026-10).
        # Under sidecar-usage-policy STRICT that runsc would refuse every sandbox: refuse the release instead.
        if [ ! -f "$stage/gvisor-bin/gvisor_sentry" ]; then
            if printf '%s\n' "$RUNSC_CONFIG_TOML" | grep -qE '^[[:space:]]*sidecar-usage-policy[[:space:]]*=[[:space:]]*"?STRICT"?[[:space:]]*$'; then
                gvz_die "gvisor.tar.bz2 has no gvisor-bin/gvisor_sentry, and runsc.toml sets sidecar-usage-policy = STRICT: runsc would refuse to boot every sandbox; nothing was installed. Use a release that ships its sidecars, or drop the STRICT setting (gvisor.runsc.config)"
            fi
            gvz_log "WARNING: gvisor.tar.bz2 has no gvisor-bin/gvisor_sentry: runsc will boot sandboxes with itself, a fallback runsc deprecates (it stops working after 2026-10)"
        fi
    else
        # renamed, not copied: the very bytes verify() hashed (KNOWN holds their digests), in this run's private folder
        mv "$GVZ_TMP/dl/runsc" "$GVZ_TMP/dl/containerd-shim-runsc-v1" "$stage/" || gvz_die "cannot stage the downloaded binaries in $GVZ_TMP"
    fi
    # Pins for the binaries themselves also hold for the ones inside an archive.
    if [ "$LAYOUT" = archive ]; then
        for f in runsc containerd-shim-runsc-v1; do
            p=$(gvz_pin "$ARCH" "$f")
            [ -n "$p" ] || continue
            staged_sum "$f"
            [ "$SUM" = "$p" ] || gvz_die "sha512 mismatch for $f inside gvisor.tar.bz2 against the pinned digest of $ARCH/$f"
            KNOWN="$KNOWN$f $SUM$nl"
        done
    fi
    [ -s "$stage/runsc" ] || gvz_die "runsc is empty"
    [ -s "$stage/containerd-shim-runsc-v1" ] || gvz_die "containerd-shim-runsc-v1 is empty"
fi

# The release's files, helpers first (the order of its install record).
if [ -z "$REUSE" ]; then
    (cd "$stage" && { [ ! -d gvisor-bin ] || find gvisor-bin -type f | sort; } && echo containerd-shim-runsc-v1 && echo runsc) >"$GVZ_TMP/install.list"
fi

# --- take a foreign install over (ADOPT_FOREIGN_RUNSC=true) ---------------------------------------------------------
# Only now, with the release verified and staged: a failed download leaves the node untouched. The aside folder is
# made under a temp name holding its manifest, then renamed into place, so it never exists without the manifest (a
# killed run's temp folder is removed by the next run, above); then each foreign path is renamed into it. A run killed
# in between leaves the folder with its manifest and some paths still in INSTALL_DIR: the next run moves the rest.
take_over() {
    if [ -d "$ASIDE" ] && [ ! -L "$ASIDE" ] && [ ! -f "$ASIDE/manifest" ]; then
        rmdir "$ASIDE" || gvz_die "cannot remove the empty $INSTALL_DIR/.gvisorgen-foreign"
    fi
    if [ ! -e "$ASIDE" ]; then
        new=$IDIR/.gvisorgen-foreign.new.$$
        GVZ_CLEANUP_FILES="$GVZ_CLEANUP_FILES $new"
        mkdir -m 0700 "$new" || gvz_die "cannot create $INSTALL_DIR/.gvisorgen-foreign; nothing was moved or installed"
        {
            echo "# gvisorgen: what install-runsc found in $INSTALL_DIR without gvisorgen's stamp and moved into this folder (ADOPT_FOREIGN_RUNSC=true); uninstall-runsc gives it back. Do not edit."
            for n in $FOREIGN; do echo "moved $n"; done
            for n in $FOREIGN; do gvz_describe "$IDIR" "$n"; done
        } >"$new/manifest" || gvz_die "cannot write the manifest of $INSTALL_DIR/.gvisorgen-foreign; nothing was moved or installed"
        { [ ! -e "$ASIDE" ] && mv "$new" "$ASIDE" && [ ! -e "$ASIDE/${new##*/}" ]; } ||
            gvz_die "cannot create $INSTALL_DIR/.gvisorgen-foreign; nothing was moved or installed"
    fi
    for n in $FOREIGN; do
        if [ -e "$ASIDE/$n" ] || [ -L "$ASIDE/$n" ]; then gvz_die "$INSTALL_DIR/.gvisorgen-foreign/$n exists already; not moving $INSTALL_DIR/$n"; fi
        mv "$IDIR/$n" "$ASIDE/$n" || gvz_die "cannot move $INSTALL_DIR/$n aside into $INSTALL_DIR/.gvisorgen-foreign/"
    done
    gvz_log "WARNING: took over $SHOWN, which gvisorgen did not install (ADOPT_FOREIGN_RUNSC=true): moved aside into $INSTALL_DIR/.gvisorgen-foreign/ (its manifest records each file's sha512 and mode), replaced by the verified gVisor $GVISOR_VERSION; uninstall gives them back"
}
if [ -n "$FOREIGN" ]; then take_over; fi

# --- install: the release's folder, then the shim, then the stamp ----------------------------------------------------
# The folder is filled under a temp name and renamed into place whole: a sandbox never meets half a release. A folder
# of this release already there (an install killed before its stamp, or one whose files no longer verify) is renamed
# aside first and removed after. The shim in INSTALL_DIR (where containerd finds it) is then replaced by rename: shims
# already running keep theirs, new containers start this one. runsc.toml, which names the release's runsc, is
# configure-containerd's to switch; until then new sandboxes still get the previous release, which this run kept.
if [ -z "$REUSE" ]; then
    if [ ! -d "$REL" ]; then
        mkdir -m 0755 "$REL" 2>/dev/null || [ -d "$REL" ] || gvz_die "cannot create $GVZ_RELEASES"
        [ ! -L "$REL" ] || gvz_die "$GVZ_RELEASES became a symlink; nothing was installed"
    fi
    files=""
    shim_sum=""
    while IFS= read -r f; do
        staged_sum "$f"
        files="$files
file $SUM $VDIR/$f"
        [ "$f" != containerd-shim-runsc-v1 ] || shim_sum=$SUM
    done <"$GVZ_TMP/install.list"
    [ -n "$shim_sum" ] || gvz_die "the install list names no containerd-shim-runsc-v1"
    files="$files
file $shim_sum containerd-shim-runsc-v1
file $DISPATCH_SUM $GVZ_DISPATCH_NAME"
    # What this run installs, before the first file: see INSTALLING above.
    {
        echo "# gvisorgen: what install-runsc is installing into $INSTALL_DIR (removed once the stamp is written). Do not edit."
        printf '%s\n' "$files" | sed '/^$/d'
    } | gvz_atomic_write "$INSTALLING" 0644 || gvz_die "cannot write $INSTALL_DIR/.gvisorgen-runsc.installing"
    new=$REL/.$V.new.$$
    GVZ_CLEANUP_FILES="$GVZ_CLEANUP_FILES $new"
    mkdir -m 0755 "$new" || gvz_die "cannot create $GVZ_RELEASES/.$V.new.$$"
    while IFS= read -r f; do
        case $f in */*) mkdir -p "$new/${f%/*}" || gvz_die "cannot create $GVZ_RELEASES/.$V.new.$$/${f%/*}" ;; esac
        { cp "$stage/$f" "$new/$f" && chmod 0755 "$new/$f"; } || gvz_die "cannot write $GVZ_RELEASES/.$V.new.$$/$f"
    done <"$GVZ_TMP/install.list"
    old=""
    if [ -d "$REL/$V" ]; then
        old=$REL/.$V.old.$$
        mv "$REL/$V" "$old" || gvz_die "cannot move the earlier $GVZ_RELEASES/$V aside"
    fi
    if ! mv "$new" "$REL/$V" || [ -e "$REL/$V/${new##*/}" ]; then
        [ -z "$old" ] || [ -e "$REL/$V" ] || mv "$old" "$REL/$V" || true
        gvz_die "cannot rename the new release into $GVZ_RELEASES/$V"
    fi
    [ -z "$old" ] || rm -rf "$old"
    rsources=$(printf '%s\n' "$sources" | sed '/^$/d' | awk -v v="$V" '{ print "rsource", v, $2, $3, $4 }')
else
    if [ "$PREV" = "$V" ]; then
        gvz_log "gVisor $V is installed in $GVZ_RELEASES/$V and verifies; putting the shim and $GVZ_DISPATCH_NAME in $INSTALL_DIR back as it records them, no download"
    else
        gvz_log "gVisor $V is still on this node in $GVZ_RELEASES/$V and verifies: switching back to it, no download"
    fi
    files=$(awk -v d="$VDIR/" '$1 == "file" && index($3, d) == 1' "$STAMP")
    files="$files
file $(awk -v f="$VDIR/containerd-shim-runsc-v1" '$1 == "file" && $3 == f { print $2 }' "$STAMP") containerd-shim-runsc-v1
file $DISPATCH_SUM $GVZ_DISPATCH_NAME"
    rsources=$(awk -v v="$V" '$1 == "rsource" && $2 == v' "$STAMP")
fi
gvz_atomic_copy "$REL/$V/containerd-shim-runsc-v1" "$IDIR/containerd-shim-runsc-v1" 0755 || gvz_die "cannot install $INSTALL_DIR/containerd-shim-runsc-v1"
if ! cmp -s "$GVZ_TMP/dispatch" "$IDIR/$GVZ_DISPATCH_NAME" 2>/dev/null; then
    gvz_atomic_copy "$GVZ_TMP/dispatch" "$IDIR/$GVZ_DISPATCH_NAME" 0755 || gvz_die "cannot install $GVZ_DISPATCH"
    gvz_log "wrote $GVZ_DISPATCH (the runsc runsc.toml names: each call goes to the release whose state root holds the container)"
fi

# What the readiness probe may trust without hashing again (it runs every 30 s by default on every node; hashing a release is
# ~200 MB of reads): each current file's identity on disk, taken first, then every file hashed as it is on disk. A
# write after the identity was taken changes it; one before it fails the hash here.
printf '%s\n' "$files" | awk 'NF == 3 { print $2 "  " $3 }' >"$GVZ_TMP/cur.sha512"
# shellcheck disable=SC2046 # the stamp's paths: no blanks (gVisor's own file names)
seen=$(gvz_seen "$IDIR" $(awk '{ print $2 }' "$GVZ_TMP/cur.sha512")) || gvz_die "cannot stat the files installed in $INSTALL_DIR"
(cd "$IDIR" && sha512sum -c -s "$GVZ_TMP/cur.sha512") >/dev/null 2>&1 ||
    gvz_die "the files installed in $INSTALL_DIR do not hash to the digests this run recorded (a disk or filesystem fault, or another writer); the stamp was not written"

# The stamp: this release first (version, arch, layout, sources, files, identities), then every other release kept, as
# recorded.
{
    echo "# gvisorgen: what is installed in $INSTALL_DIR (written last by install-runsc). Do not edit."
    echo "version $V"
    echo "arch $ARCH"
    echo "layout $LAYOUT"
    printf '%s\n' "$rsources" | awk 'NF { print "source", $3, $4, $5 }'
    printf '%s\n' "$files" | sed '/^$/d'
    printf '%s\n' "$seen"
    printf '%s\n' "$rsources" | sed '/^$/d'
    if [ -f "$STAMP" ]; then
        gvz_stamp_without "$STAMP" "$V" | awk -v d="$GVZ_DISPATCH_NAME" '($1 == "file" && $3 != "containerd-shim-runsc-v1" && $3 != d) || $1 == "rsource" || $1 == "collecting"'
    fi
} | gvz_atomic_write "$STAMP" 0644 || gvz_die "cannot write the stamp $GVZ_STAMP"
rm -f "$INSTALLING"

kept=$(gvz_rel_list "$STAMP" | grep -vx -- "$V" | tr '\n' ' ' | sed 's/ $//')
gvz_log "installed gVisor $V ($ARCH, $LAYOUT) into $GVZ_RELEASES/$V: runsc $(awk -v f="$VDIR/runsc" '$1 == "file" && $3 == f { print substr($2, 1, 16) }' "$STAMP")...${kept:+; older releases kept until their sandboxes are gone: $kept}"
