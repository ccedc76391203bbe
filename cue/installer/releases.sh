#!/bin/sh
# releases.sh: gVisor releases side by side, sourced after lib.sh by install-runsc.sh and uninstall.sh.
#
# Each release lives in INSTALL_DIR/gvisor-releases/<version>/ (runsc, containerd-shim-runsc-v1, gvisor-bin/), and
# runsc.toml names gvisorgen-runsc (binary_name) and the current one's own state root (root = STATE_DIR/runsc/<version>).
# The shim reads runsc.toml when it creates a container and keeps both for that container's life (it saves them in the
# bundle's state.json for its cleanup too), and gvisorgen-runsc runs each call with the release whose root holds the
# container (or the sandbox a new container joins), so a sandbox and every container in it keep the runsc that created
# the sandbox across a bump or a rollback, and only that runsc ever sees its state. "legacy" is an unversioned install (gvisorgen before versioned releases:
# runsc and gvisor-bin/ directly in INSTALL_DIR, state under /run/containerd/runsc, runsc found by name or by
# INSTALL_DIR/runsc): kept, like an old release, until no sandbox uses it.
#
# The stamp records every release present: "file <sha512> <path>" for each of its files (paths relative to
# INSTALL_DIR), "rsource <version> <artifact> <sha512> <how>" for what it was installed from, and "collecting
# <release>" while one is being removed (a run killed then finishes the job next time: it was judged unused, and
# nothing names it any more).

# rel(path): the release a stamp's file path belongs to, as an awk function (with -v D="$GVZ_RELEASES_NAME"): its
# folder under gvisor-releases/, "legacy" for the unversioned install's files (runsc, gvisor-bin/ in INSTALL_DIR), ""
# for the others (the shim). The one home of that rule for the stamp's readers below.
GVZ_AWK_REL='function rel(f, p) { if (index(f, D "/") == 1) { split(f, p, "/"); return p[2] } if (f == "runsc" || index(f, "gvisor-bin/") == 1) return "legacy"; return "" }'

# gvz_rel_list STAMP : the releases the stamp records, one per line ("<version>" or "legacy"), sorted.
gvz_rel_list() {
    [ -f "$1" ] || return 0
    awk -v D="$GVZ_RELEASES_NAME" "$GVZ_AWK_REL"'
        $1 == "file" && rel($3) != "" { print rel($3); next }
        $1 == "collecting" { print $2 }' "$1" | sort -u
}

# gvz_rel_files STAMP RELEASE : the paths (relative to INSTALL_DIR) of RELEASE's files in the stamp.
gvz_rel_files() {
    awk -v D="$GVZ_RELEASES_NAME" -v r="$2" "$GVZ_AWK_REL"'
        $1 == "file" && rel($3) == r { print $3 }' "$1"
}

# gvz_rel_bin RELEASE / gvz_rel_root RELEASE : the host paths of RELEASE's runsc and of its state root.
gvz_rel_bin() {
    if [ "$1" = legacy ]; then echo "$INSTALL_DIR/runsc"; else echo "$GVZ_RELEASES/$1/runsc"; fi
}
gvz_rel_root() {
    if [ "$1" = legacy ]; then echo "$GVZ_LEGACY_ROOT"; else echo "$GVZ_RUNSC_ROOTS/$1"; fi
}

# gvz_rel_named_by_toml : the release runsc.toml (RUNSC_CONFIG) names for new sandboxes: with gvisorgen-runsc as its
# binary_name, the release of its root; else its binary_name's folder under gvisor-releases (an install before
# gvisorgen-runsc), "legacy" when it names INSTALL_DIR/runsc or none (the shim then runs "runsc" from PATH), nothing
# for another runsc.
gvz_rel_named_by_toml() {
    [ -f "$HOST_ROOT$RUNSC_CONFIG" ] || return 0
    _gvz_b=$(sed -n 's/^[[:space:]]*binary_name[[:space:]]*=[[:space:]]*"\(.*\)"[[:space:]]*$/\1/p' "$HOST_ROOT$RUNSC_CONFIG" | head -n 1)
    if [ "$_gvz_b" = "$GVZ_DISPATCH" ]; then
        _gvz_b=$(sed -n 's/^[[:space:]]*root[[:space:]]*=[[:space:]]*"\(.*\)"[[:space:]]*$/\1/p' "$HOST_ROOT$RUNSC_CONFIG" | head -n 1)
        case $_gvz_b in
        "" | "$GVZ_LEGACY_ROOT") echo legacy ;;
        "$GVZ_RUNSC_ROOTS"/*)
            case ${_gvz_b#"$GVZ_RUNSC_ROOTS"/} in */* | '') ;; *) echo "${_gvz_b#"$GVZ_RUNSC_ROOTS"/}" ;; esac
            ;;
        esac
        return 0
    fi
    case $_gvz_b in
    "" | "$INSTALL_DIR/runsc" | runsc) echo legacy ;;
    "$GVZ_RELEASES"/*/runsc)
        _gvz_b=${_gvz_b#"$GVZ_RELEASES"/}
        case ${_gvz_b%/runsc} in */* | '') ;; *) echo "${_gvz_b%/runsc}" ;; esac
        ;;
    esac
}

# gvz_dispatcher_text : gvisorgen-runsc as install-runsc writes it to the host: the script of that name with this
# node's paths in its GVZ_D_ lines (each must be there once: an edit of the script that loses one is an error here).
gvz_dispatcher_text() {
    awk -v rel="$GVZ_RELEASES" -v roots="$GVZ_RUNSC_ROOTS" -v lroot="$GVZ_LEGACY_ROOT" -v lbin="$INSTALL_DIR/runsc" \
        -v cfg="$RUNSC_CONFIG" '
        BEGIN { v["RELEASES"] = rel; v["ROOTS"] = roots; v["LEGACY_ROOT"] = lroot; v["LEGACY_BIN"] = lbin; v["CONFIG"] = cfg }
        /^GVZ_D_[A-Z_]+=/ {
            k = substr($0, 7, index($0, "=") - 7)
            if (!(k in v) || (k in seen)) { bad = 1; next }
            seen[k] = 1; print "GVZ_D_" k "=" v[k]; next
        }
        { print }
        END { n = 0; for (k in seen) n++; exit (bad || n != 5) }' "${GVISORGEN_SCRIPTS:-/gvisorgen}/$GVZ_DISPATCH_NAME.sh" ||
        gvz_die "${GVISORGEN_SCRIPTS:-/gvisorgen}/$GVZ_DISPATCH_NAME.sh does not set each of GVZ_D_RELEASES, GVZ_D_ROOTS, GVZ_D_LEGACY_ROOT, GVZ_D_LEGACY_BIN and GVZ_D_CONFIG once"
}

# gvz_rel_users RELEASE : what still uses RELEASE on this host, asked of the host itself: the containers its runsc knows
# in its state root (one `runsc --root <root>/<namespace> list` per containerd namespace there: running and stopped
# ones alike, since a stopped container's cleanup runs that runsc again), and the processes running one of its files
# (the sandbox, its gofer and sidecars). One line each; status 0 when something uses it or when it cannot be told (a
# list that fails, a missing runsc with state left, no answer from the host: an "unknown:" line says so and the release
# is kept), 1 when provably unused.
gvz_rel_users() {
    _gvz_bin=$(gvz_rel_bin "$1")
    _gvz_root=$(gvz_rel_root "$1")
    if [ "$1" = legacy ]; then _gvz_pre="$INSTALL_DIR/runsc $INSTALL_DIR/gvisor-bin/"; else _gvz_pre="$GVZ_RELEASES/$1/"; fi
    # One host command, which prints the raw facts: "F <dev:inode> <path>" for each of the release's files, "P
    # <dev:inode> /proc/<pid>/exe" for each process (one stat for all; those that go meanwhile are skipped), "C
    # <namespace>/<id>" for each container a namespace's list names, "U <why>" when it cannot tell. Processes are matched
    # by device and inode, not by the path their exe link shows: a sandbox runs in mount namespaces of its own.
    # shellcheck disable=SC2016,SC2086 # expanded by the host shell; GVZ_HX and the prefixes are split on purpose
    _gvz_out=$(timeout 120 $GVZ_HX sh -c '
        bin=$1 root=$2; shift 2
        for pre; do
            pre=${pre%/}
            if [ -d "$pre" ]; then find "$pre" -type f -exec stat -L -c "F %d:%i %n" {} +; elif [ -f "$pre" ]; then stat -L -c "F %d:%i %n" "$pre"; fi
        done 2>/dev/null
        stat -L -c "P %d:%i %n" /proc/[0-9]*/exe 2>/dev/null
        [ -d "$root" ] || exit 0
        for d in "$root"/*/; do
            [ -d "$d" ] || continue
            d=${d%/}
            if [ ! -x "$bin" ]; then echo "U $d holds runsc state and $bin is gone"; exit 0; fi
            if ! ids=$(timeout 30 "$bin" --root "$d" list -quiet 2>&1); then
                echo "U $bin --root $d list failed: $(printf "%s" "$ids" | head -n 1 | cut -c1-200)"; exit 0
            fi
            for i in $ids; do echo "C ${d##*/}/$i"; done
        done' sh "$_gvz_bin" "$_gvz_root" $_gvz_pre 2>/dev/null) || _gvz_out="U could not ask the host what uses $1"
    _gvz_out=$(printf '%s\n' "$_gvz_out" | awk '
        $1 == "F" { file[$2] = $3; next }
        $1 == "P" && ($2 in file) { p = $3; sub("^/proc/", "", p); sub("/exe$", "", p); print "process " p " runs " file[$2]; next }
        $1 == "C" { print "container " $2; next }
        $1 == "U" { sub("^U ", ""); print "unknown: " $0 }')
    [ -n "$_gvz_out" ] || return 1
    printf '%s\n' "$_gvz_out"
}

# gvz_rel_show RELEASE : how logs name a release.
gvz_rel_show() {
    if [ "$1" = legacy ]; then echo "the unversioned install (runsc in $INSTALL_DIR)"; else echo "$GVZ_RELEASES/$1"; fi
}

# gvz_stamp_without STAMP RELEASE... : the stamp's lines but those of the RELEASEs (their files, sources, marks).
gvz_stamp_without() {
    _gvz_s=$1
    shift
    awk -v D="$GVZ_RELEASES_NAME" -v rs=" $* " "$GVZ_AWK_REL"'
        function gone(r) { return index(rs, " " r " ") > 0 }
        $1 == "file" && rel($3) != "" && gone(rel($3)) { next }
        ($1 == "rsource" || $1 == "collecting") && gone($2) { next }
        { print }' "$_gvz_s"
}

# gvz_rel_collect STAMP RELEASE : remove RELEASE (judged unused by the caller): first marked "collecting" in the stamp,
# then its files and empty folders, its empty state root, then its lines. Nothing outside what the stamp names.
gvz_rel_collect() {
    if ! grep -qx "collecting $2" "$1"; then
        { cat "$1"; echo "collecting $2"; } | gvz_atomic_write "$1" 0644 || gvz_die "cannot write the stamp $GVZ_STAMP"
    fi
    gvz_rel_files "$1" "$2" | while IFS= read -r _gvz_f; do
        rm -f "$HOST_ROOT$INSTALL_DIR/$_gvz_f"
    done
    if [ "$2" = legacy ]; then
        _gvz_d=$HOST_ROOT$INSTALL_DIR/gvisor-bin
    else
        _gvz_d=$HOST_ROOT$GVZ_RELEASES/$2
    fi
    if [ -d "$_gvz_d" ] && [ ! -L "$_gvz_d" ]; then
        # only empty folders: anything left in them is not gvisorgen's
        find "$_gvz_d" -depth -type d | while IFS= read -r _gvz_e; do rmdir "$_gvz_e" 2>/dev/null || true; done
        [ ! -d "$_gvz_d" ] || gvz_log "WARNING: ${_gvz_d#"$HOST_ROOT"} holds files gvisorgen did not install; left in place"
    fi
    gvz_rel_rmroot "$2"
    gvz_stamp_without "$1" "$2" | gvz_atomic_write "$1" 0644 || gvz_die "cannot write the stamp $GVZ_STAMP"
}

# gvz_rel_rmroot RELEASE : remove RELEASE's state root under STATE_DIR/runsc once its runsc knows no container (the
# caller asked): what runsc leaves there and nothing else, a folder per containerd namespace holding lock files and
# null-netns, the empty network namespace runsc bind-mounts for its gofers (possibly stacked). On the host: the mount
# is the host's, and this container's copy of it (made when the container started) would keep the file busy here.
# Anything else is left, with a warning. The legacy root is the shim's default: never touched.
gvz_rel_rmroot() {
    [ "$1" != legacy ] || return 0
    _gvz_r=$HOST_ROOT$GVZ_RUNSC_ROOTS/$1
    if [ -d "$_gvz_r" ] && [ ! -L "$_gvz_r" ]; then
        # shellcheck disable=SC2016 # expanded by the host shell
        gvz_host sh -c 'for d in "$1"/*/; do
                d=${d%/}
                if [ ! -d "$d" ] || [ -L "$d" ]; then continue; fi
                i=0
                while [ $i -lt 64 ] && umount -l "$d/null-netns" 2>/dev/null; do i=$((i + 1)); done
                for f in "$d/null-netns" "$d"/*.lock; do if [ -f "$f" ] && [ ! -L "$f" ]; then rm -f "$f"; fi; done
            done
            find "$1" -depth -type d | while IFS= read -r d; do rmdir "$d" 2>/dev/null || true; done' sh "$GVZ_RUNSC_ROOTS/$1" || true
        [ ! -d "$_gvz_r" ] || gvz_log "WARNING: $GVZ_RUNSC_ROOTS/$1 (gVisor $1's runsc state) holds files runsc did not leave there; left in place"
    fi
    rmdir "$HOST_ROOT$GVZ_RUNSC_ROOTS" 2>/dev/null || true
}
