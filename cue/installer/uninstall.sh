#!/bin/sh
# uninstall.sh: the single init container `uninstall-runsc` of the runsc-installer DaemonSet in uninstall mode.
#
# Removes what gvisorgen put on the node: the managed block in CONTAINERD_CONFIG and gvisorgen's drop-in (where the
# config imports a folder for one, or where the applied marker says it went; only a file with gvisorgen's managed first
# line; the folder too when gvisorgen created it and it is empty), validated with the host's containerd before the
# swap (dump exits 0 and still shows the default runtime), RUNSC_CONFIG (only when gvisorgen
# wrote it), the files listed in the stamp and in install-runsc's record of an install that did not finish
# (.gvisorgen-runsc.installing): every release, containerd-shim-runsc-v1, gvisorgen-runsc, then the stamp and the
# record; restarts containerd, only when the config changed (or an earlier uninstall changed it and was not seen through: the applied
# marker, which goes only after a verified restart, names another config), waits for CRI, and rolls the config back on
# failure. Once containerd serves CRI with the config as restored, the applied marker and the backup
# CONTAINERD_CONFIG.gvisorgen-backup go too (the backup is the config before gvisorgen first changed it: the restored
# config is that plus whatever was edited since, so it has served its purpose; it stays when CRI is not verified).
# Last, binaries that install-runsc moved aside when it took a foreign install over (ADOPT_FOREIGN_RUNSC=true) are
# given back into INSTALL_DIR by rename from INSTALL_DIR/.gvisorgen-foreign/, checked against its manifest (type,
# mode, owner, sha512), and the folder is removed; only after the restart, so the running containerd never has
# gvisorgen's runtime with them. A runsc runtime written by hand (outside the block) and runsc binaries gvisorgen did
# not install are left.
# Refuses, changing nothing, while any container with runtime io.containerd.runsc.v1 exists on the node (drain the
# gVisor pods first: cordon the node and delete the pods with runtimeClassName gvisor); the pod retries by itself.
# Environment: HOST_ROOT HOST_EXEC GVISOR_MODE=uninstall INSTALL_DIR CONTAINERD_CONFIG RUNSC_CONFIG STATE_DIR
#   RESTART_TIMEOUT_SECONDS LOCK_TIMEOUT_SECONDS (see README.md). What was moved aside is given back whatever
#   ADOPT_FOREIGN_RUNSC says now.
set -eu
GVZ_NAME=uninstall-runsc
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "${GVISORGEN_SCRIPTS:-/gvisorgen}/lib.sh"
# shellcheck source-path=SCRIPTDIR source=releases.sh
. "${GVISORGEN_SCRIPTS:-/gvisorgen}/releases.sh"
# shellcheck source-path=SCRIPTDIR source=classes.sh
. "${GVISORGEN_SCRIPTS:-/gvisorgen}/classes.sh"
# shellcheck disable=SC2086 # list of applet names
gvz_need_applets $GVZ_BASE_APPLETS ls rmdir
gvz_load_env
gvz_check_classes
gvz_cas_args "$@"
[ "$GVISOR_MODE" = uninstall ] || gvz_die "GVISOR_MODE is '$GVISOR_MODE': uninstall-runsc runs only in uninstall mode"

IDIR=$HOST_ROOT$INSTALL_DIR
STAMP=$HOST_ROOT$GVZ_STAMP
CFG=$HOST_ROOT$CONTAINERD_CONFIG
CHECK=$HOST_ROOT$GVZ_CHECK
RCFG=$HOST_ROOT$RUNSC_CONFIG
[ -d "$IDIR" ] || gvz_die "install dir $INSTALL_DIR is not mounted at $IDIR"
[ -d "$HOST_ROOT$GVZ_CFG_DIR" ] || gvz_die "containerd config dir $GVZ_CFG_DIR is not mounted at $HOST_ROOT$GVZ_CFG_DIR"
[ ! -L "$CFG" ] || gvz_die "$CONTAINERD_CONFIG is a symlink; refusing to replace it"

gvz_check_host
gvz_setup_traps
gvz_lock
GVZ_CLEANUP_FILES="$GVZ_CLEANUP_FILES $CHECK"
T=$GVZ_TMP
first_error() { grep -iE 'level=(error|fatal)|failed|error' "$1" | head -n 1 | cut -c1-400; }

# --- the config's socket, then: any gVisor container left? --------------------------------------------------------------
addr=/run/containerd/containerd.sock
cur_state=missing
if [ -f "$CFG" ]; then
    cur_state=rejected
    if gvz_dump "$CONTAINERD_CONFIG" "$T/cur.dump" "$T/cur.err"; then
        cur_state=ok
        gvz_fact "$T/cur.dump" addr
        addr=$GVZ_FACT
    fi
fi
# shellcheck disable=SC2086 # GVZ_HX (HOST_EXEC + env PATH=HOST_PATH) is a command prefix, split on purpose
nss=$(timeout 20 $GVZ_HX ctr --address "$addr" namespaces ls -q 2>"$T/ctr.err") ||
    gvz_die "cannot list containerd's namespaces on $addr ($(head -c 200 "$T/ctr.err")); refusing to remove gVisor without knowing that no sandbox runs"
: >"$T/sandboxes"
for ns in $nss; do
    # shellcheck disable=SC2086 # GVZ_HX (HOST_EXEC + env PATH=HOST_PATH) is a command prefix, split on purpose
    timeout 20 $GVZ_HX ctr --address "$addr" -n "$ns" containers ls >"$T/ctrs" 2>"$T/ctr.err" ||
        gvz_die "cannot list the containers of namespace $ns ($(head -c 200 "$T/ctr.err")); refusing to remove gVisor"
    # shellcheck disable=SC2086 # GVZ_HX (HOST_EXEC + env PATH=HOST_PATH) is a command prefix, split on purpose
    timeout 20 $GVZ_HX ctr --address "$addr" -n "$ns" tasks ls >"$T/tasks" 2>"$T/ctr.err" ||
        gvz_die "cannot list the tasks of namespace $ns ($(head -c 200 "$T/ctr.err")); refusing to remove gVisor"
    # A runsc container whose task is not STOPPED is a live sandbox; the rest are
    # leftovers of deleted pods that kubelet removes within about a minute.
    awk -v ns="$ns" -v tasks="$T/tasks" '
        BEGIN { while ((getline l < tasks) > 0) { split(l, f); if (f[3] != "" && f[3] != "STATUS" && f[3] != "STOPPED") live[f[1]] = 1 } }
        NR > 1 && $NF ~ /runsc/ { print ns "/" $1, ($1 in live) ? "live" : "stopped" }' "$T/ctrs" >>"$T/sandboxes"
done
if [ -s "$T/sandboxes" ]; then
    live=$(awk '$2 == "live" { print $1 }' "$T/sandboxes")
    if [ -n "$live" ]; then
        gvz_die "$(echo "$live" | wc -l) gVisor container(s) still run on this node ($(echo "$live" | head -n 5 | tr '\n' ' ')): drain them first (kubectl cordon the node and delete the pods with runtimeClassName gvisor); uninstall retries by itself"
    fi
    gvz_die "$(wc -l <"$T/sandboxes") stopped gVisor container(s) still on this node ($(awk '{ print $1 }' "$T/sandboxes" | head -n 5 | tr '\n' ' ')): kubelet removes the containers of deleted pods within about a minute; uninstall waits for that and retries by itself"
fi

# --- the config without gvisorgen's block, and without gvisorgen's drop-in ---------------------------------------------
APPLIED=$HOST_ROOT$GVZ_APPLIED
changed=
has_block=
din_gone=
GVZ_DROPIN=
if [ -f "$CFG" ]; then GVZ_DROPIN=$(gvz_dropin_path "$CFG"); fi
# gvisorgen's drop-ins: where the config imports a folder for one now, and where the applied marker says it went.
rec=$(awk '$1 == "mode" && $2 == "dropin" { print $3 }' "$APPLIED" 2>/dev/null || true)
dins=
for p in $(printf '%s\n' "$GVZ_DROPIN" "$rec" | awk 'NF && !seen[$0]++'); do
    case $p in
    *[!A-Za-z0-9._/-]* | *//* | */./* | */../*) gvz_die "the applied marker $GVZ_APPLIED names '$p' as gvisorgen's drop-in, which is no plain path; fix or remove the marker by hand" ;;
    "$GVZ_CFG_DIR"/*/"$GVZ_DROPIN_NAME" | "$GVZ_CFG_DIR/$GVZ_DROPIN_NAME") ;;
    *) gvz_die "the applied marker $GVZ_APPLIED names $p as gvisorgen's drop-in, which is not where gvisorgen writes one; fix or remove the marker by hand" ;;
    esac
    if gvz_is_managed "$HOST_ROOT$p"; then
        dins="$dins $p"
    elif [ -e "$HOST_ROOT$p" ] || [ -L "$HOST_ROOT$p" ]; then
        gvz_log "$p is not gvisorgen's (no '$GVZ_MANAGED' first line, or not a plain file); left in place"
    fi
done
if [ -f "$CFG" ]; then
    cp "$CFG" "$T/current"
    mode=$(stat -c %a "$CFG")
    # shellcheck disable=SC2046 # two numbers
    set -- $(gvz_block_count "$T/current")
    case "$1 $2" in
    "0 0")
        gvz_log "no gvisorgen block in $CONTAINERD_CONFIG"
        cp "$T/current" "$T/candidate"
        ;;
    "1 1")
        has_block=1
        gvz_strip_block "$T/current" >"$T/candidate"
        ;;
    *) gvz_die "gvisorgen's block markers in $CONTAINERD_CONFIG are damaged ($1 begin, $2 end lines); fix the file by hand" ;;
    esac
fi
if [ -n "$has_block" ] || [ -n "$dins" ]; then
    # Removing them means a restart: only when the running containerd serves CRI (else it would not come back with
    # CRI either; refuse, nothing changed, zero restarts).
    gvz_require_cri "$addr" "$cur_state" "$T/cur.err" "$T/cur.dump"
fi
# Validated unless there is no config at all (containerd then loads no import: a drop-in left is inert).
if { [ -n "$has_block" ] || [ -n "$dins" ]; } && [ -f "$CFG" ]; then
    gvz_imports "$T/candidate" >"$T/imports.list"
    GVZ_SELF_IMPORT=
    if gvz_self_importing "$T/candidate"; then GVZ_SELF_IMPORT=1; fi
    gvz_to_check "$T/candidate" "$T/imports.list"
    if [ -z "$GVZ_SELF_IMPORT" ] && gvz_dump "$GVZ_CHECK" "$T/cand.dump" "$T/cand.err" && gvz_self_importing "$T/candidate" "$T/cand.dump"; then
        # the copy imports the live config (block and all) through a file it imports: spell the patterns' files out
        GVZ_SELF_IMPORT=1
        gvz_imports "$T/candidate" "$T/cand.dump" >"$T/imports.list"
        gvz_to_check "$T/candidate" "$T/imports.list"
    fi
    gvz_dump "$GVZ_CHECK" "$T/cand.dump" "$T/cand.err" ||
        gvz_die "the host's containerd rejects $CONTAINERD_CONFIG without gvisorgen's runtime ($(first_error "$T/cand.err")); not touching it"
    gvz_fact "$T/cand.dump" default
    d=${GVZ_FACT:-runc}
    gvz_dump_defines "$T/cand.dump" "$d" ||
        gvz_die "without gvisorgen's runtime the default runtime '$d' would be missing; not touching $CONTAINERD_CONFIG"
    for h in runsc $GVZ_CLASSES; do
        if gvz_dump_defines "$T/cand.dump" "$h"; then
            gvz_log "a $h runtime that gvisorgen did not write stays (in $CONTAINERD_CONFIG or a file it imports)"
        fi
    done
    rm -f "$CHECK"
fi
if [ -n "$dins" ]; then
    # The drop-ins first (kept in scratch for a rollback): a run killed before the config's swap leaves the block,
    # which the next run removes.
    n=0
    for p in $dins; do
        n=$((n + 1))
        cp "$HOST_ROOT$p" "$T/din.$n"
        rm -f "$HOST_ROOT$p"
        gvz_log "removed gvisorgen's drop-in $p"
        changed=1
        din_gone="$din_gone $n:$p"
    done
fi
if [ -n "$has_block" ]; then
    new_backup=
    if [ ! -e "$HOST_ROOT$GVZ_BACKUP" ]; then
        gvz_atomic_copy "$T/current" "$HOST_ROOT$GVZ_BACKUP" "$mode" || gvz_die "cannot write the backup $GVZ_BACKUP; nothing changed"
        new_backup=1
    fi
    rc=0
    gvz_cas_replace "$T/current" "$T/candidate" "$CFG" "$mode" || rc=$?
    if [ "$rc" -ne 0 ]; then
        if [ -n "$new_backup" ]; then rm -f "$HOST_ROOT$GVZ_BACKUP"; fi
        if [ "$rc" -eq 3 ]; then gvz_cas_retry; fi
        [ "$rc" -ne 3 ] || gvz_die "$CONTAINERD_CONFIG was changed by another writer while gvisorgen validated its edit, on each of $GVZ_CAS_ATTEMPTS attempts; nothing was changed and containerd was not restarted. Fix: none needed if that writer is done, uninstall retries by itself"
        gvz_die "cannot replace $CONTAINERD_CONFIG; it is untouched"
    fi
    gvz_log "removed gvisorgen's block from $CONTAINERD_CONFIG (backup: $GVZ_BACKUP)"
    changed=1
    # a block an older gvisorgen wrote may name runsc.toml at another path (never reconfigured since)
    gvz_remove_moved_runsc_config "$(gvz_block_config_path "$T/current")" "$(sed -n 3p "$APPLIED" 2>/dev/null || true)"
fi

# --- runsc.toml, binaries, stamp ---------------------------------------------------------------------------------------
# The further classes' runsc.toml first (they share RUNSC_CONFIG's folder), gvisorgen's by their header as runsc.toml
# is: those the applied marker records, then those of RUNSC_CLASSES, which a run killed before its marker left.
gvz_class_files "$HOST_ROOT$GVZ_APPLIED" >"$T/classes"
while read -r h _ f; do gvz_remove_class_config "$f" - "the runsc.toml of the class with handler $h"; done <"$T/classes"
for h in $GVZ_CLASSES; do
    gvz_remove_class_config "$(gvz_class_config "$h")" - "the runsc.toml of the class with handler $h"
done
if [ -f "$RCFG" ]; then
    if head -n 1 "$RCFG" | grep -q '^# Managed by gvisorgen'; then
        rm -f "$RCFG"
        gvz_log "removed $RUNSC_CONFIG"
        # The subfolder goes only if gvisorgen created it (its marker is there) and nothing else is in it.
        _rdir=${RCFG%/*}
        if [ "${RUNSC_CONFIG%/*/*}" = "$GVZ_CFG_DIR" ] && [ -f "$_rdir/$GVZ_DIR_MARK" ]; then
            if [ "$(ls -A "$_rdir")" = "$GVZ_DIR_MARK" ]; then
                rm -f "$_rdir/$GVZ_DIR_MARK"
                rmdir "$_rdir" && gvz_log "removed ${RUNSC_CONFIG%/*}"
            else
                gvz_log "${RUNSC_CONFIG%/*} holds other files; left in place"
            fi
        fi
    else
        gvz_log "$RUNSC_CONFIG was not written by gvisorgen; left in place"
    fi
fi
# The files of an install that did not finish (install-runsc's record, written before its first file) are gvisorgen's
# too. Both lists go before anything is given back (below), so a run killed in between never removes what it gave back.
INSTALLING=$IDIR/.gvisorgen-runsc.installing
if [ -f "$STAMP" ] || [ -f "$INSTALLING" ]; then
    cat "$STAMP" "$INSTALLING" 2>/dev/null | awk '$1 == "file" { print $3 }' | sort -u | while IFS= read -r f; do
        case $f in /* | *..*) continue ;; esac
        rm -f "$IDIR/$f"
    done
    rmdir "$IDIR/gvisor-bin" 2>/dev/null || true
    # Every release's folder, emptied above (only empty folders go: anything else in them is not gvisorgen's), and
    # each one's runsc state root (no container is left in any: checked above).
    cat "$STAMP" "$INSTALLING" >"$T/ours" 2>/dev/null || true
    for r in $(gvz_rel_list "$T/ours"); do
        [ "$r" != legacy ] || continue
        case $r in */* | .* | '') continue ;; esac
        if [ -d "$IDIR/$GVZ_RELEASES_NAME/$r" ] && [ ! -L "$IDIR/$GVZ_RELEASES_NAME/$r" ]; then
            find "$IDIR/$GVZ_RELEASES_NAME/$r" -depth -type d | while IFS= read -r d; do rmdir "$d" 2>/dev/null || true; done
            [ ! -d "$IDIR/$GVZ_RELEASES_NAME/$r" ] || gvz_log "$GVZ_RELEASES/$r holds files gvisorgen did not install; left in place"
        fi
        gvz_rel_rmroot "$r"
    done
    if [ -d "$IDIR/$GVZ_RELEASES_NAME" ] && [ ! -L "$IDIR/$GVZ_RELEASES_NAME" ]; then
        rmdir "$IDIR/$GVZ_RELEASES_NAME" 2>/dev/null || gvz_log "$GVZ_RELEASES holds files gvisorgen did not install; left in place"
    fi
    rm -f "$STAMP" "$INSTALLING"
    gvz_log "removed gVisor (every release, containerd-shim-runsc-v1, $GVZ_DISPATCH_NAME) and the stamp from $INSTALL_DIR"
else
    gvz_log "no gvisorgen stamp in $INSTALL_DIR: no binaries of gvisorgen's to remove"
fi

# --- restart ---------------------------------------------------------------------------------------------------------
# The applied marker (the digest of the config containerd was seen serving CRI with) goes only after a verified
# restart: a run killed between the swap and that point leaves it, and the next run, which finds no block to remove,
# restarts containerd then, since the marker names another config than the one on disk. A config gvisorgen never
# changed (a hand-written runtime kept) is the one the marker names: no restart.
restart=$changed
if [ -z "$restart" ] && [ -f "$APPLIED" ] && [ -f "$CFG" ] && [ "$(head -n 1 "$APPLIED")" != "$(gvz_sha512 "$CFG")" ]; then
    gvz_log "containerd was last seen serving CRI with another $CONTAINERD_CONFIG than the one on disk (an earlier uninstall removed gvisorgen's block and did not finish): restarting it"
    restart=1
fi
if [ -z "$restart" ] && [ -n "$rec" ] && ! gvz_is_managed "$HOST_ROOT$rec" && [ -f "$APPLIED" ]; then
    gvz_log "containerd was last seen serving CRI with gvisorgen's drop-in $rec, which is gone (an earlier uninstall removed it and did not finish): restarting it"
    restart=1
fi
# rollback : the config and the drop-ins as this run found them. Status only.
rollback() {
    if [ -n "$has_block" ]; then gvz_atomic_copy "$T/current" "$CFG" "$mode" || return 1; fi
    for _e in $din_gone; do gvz_atomic_copy "$T/din.${_e%%:*}" "$HOST_ROOT${_e#*:}" 0644 || return 1; done
}
if [ -n "$restart" ]; then
    if ! gvz_restart_containerd "$addr"; then
        if [ -z "$changed" ]; then
            gvz_die "containerd does not come back with $CONTAINERD_CONFIG; the node needs attention (systemctl status containerd; journalctl -u containerd)"
        fi
        rollback || gvz_die "containerd does not come back AND restoring $CONTAINERD_CONFIG failed (backup: $GVZ_BACKUP); the node needs attention"
        gvz_log "rolled back: restored $CONTAINERD_CONFIG and gvisorgen's runtime in it (the binaries are gone; runsc pods cannot start)"
        gvz_restart_containerd "$addr" || gvz_die "containerd does not come back, even after the rollback; the node needs attention"
        gvz_die "containerd did not come back without the runsc runtime; rolled back the config and containerd runs again"
    fi
fi
# The drop-in's folder, when gvisorgen created it and it is empty now.
created=$(awk '$1 == "created" { print $2 }' "$APPLIED" 2>/dev/null || true)
case $created in
"$GVZ_CFG_DIR"/*)
    if [ -d "$HOST_ROOT$created" ] && [ ! -L "$HOST_ROOT$created" ] && [ -z "$(ls -A "$HOST_ROOT$created")" ]; then
        rmdir "$HOST_ROOT$created" && gvz_log "removed $created (gvisorgen created it for its drop-in; empty now)"
    fi
    ;;
esac
rm -f "$APPLIED" "$HOST_ROOT$GVZ_RESTARTED_FOR"
# The backup is the config before gvisorgen first changed it; the config as restored is that plus whatever was edited
# since (which the backup lacks). Once containerd serves CRI with it, nothing needs the backup any more; when that is
# not verified (containerd down, no restart was due), it stays for an admin to compare, and the next uninstall
# removes it.
if [ -f "$HOST_ROOT$GVZ_BACKUP" ] && [ ! -L "$HOST_ROOT$GVZ_BACKUP" ]; then
    if [ -n "$restart" ] || gvz_cri_ok "$addr"; then
        rm -f "$HOST_ROOT$GVZ_BACKUP"
        gvz_log "removed $GVZ_BACKUP: containerd serves CRI with $CONTAINERD_CONFIG as restored"
    else
        gvz_log "kept $GVZ_BACKUP: containerd does not serve CRI on $addr, so $CONTAINERD_CONFIG as restored is not verified"
    fi
fi

# --- give back what install-runsc moved aside ------------------------------------------------------------------------
ASIDE=$IDIR/.gvisorgen-foreign
if [ -L "$ASIDE" ] || { [ -e "$ASIDE" ] && [ ! -d "$ASIDE" ]; }; then
    gvz_log "$INSTALL_DIR/.gvisorgen-foreign is not a folder gvisorgen made; left in place"
elif [ -d "$ASIDE" ] && [ ! -f "$ASIDE/manifest" ]; then
    # emptied by an earlier uninstall killed before it removed the folder
    if [ -z "$(ls -A "$ASIDE")" ]; then
        rmdir "$ASIDE" && gvz_log "removed the empty $INSTALL_DIR/.gvisorgen-foreign"
    else
        gvz_log "$INSTALL_DIR/.gvisorgen-foreign holds files but no manifest; left in place"
    fi
elif [ -d "$ASIDE" ]; then
    back=""
    moved=$(awk '$1 == "moved" { print $2 }' "$ASIDE/manifest")
    for n in $moved; do
        case $n in runsc | containerd-shim-runsc-v1 | gvisor-bin) ;; *) gvz_die "$INSTALL_DIR/.gvisorgen-foreign/manifest names '$n', which install-runsc never moves aside; fix or remove the folder by hand" ;; esac
        back="$back $n"
        if [ ! -e "$ASIDE/$n" ] && [ ! -L "$ASIDE/$n" ]; then continue; fi
        if [ -e "$IDIR/$n" ] || [ -L "$IDIR/$n" ]; then
            gvz_die "cannot give back $INSTALL_DIR/$n (moved aside into $INSTALL_DIR/.gvisorgen-foreign/ when gvisorgen took the install over): $INSTALL_DIR/$n exists again and is not gvisorgen's (no stamp names it); move one of them away, the uninstall retries by itself"
        fi
        mv "$ASIDE/$n" "$IDIR/$n" || gvz_die "cannot move $INSTALL_DIR/.gvisorgen-foreign/$n back to $INSTALL_DIR/$n"
    done
    back=${back# }
    # only_in A B : the first lines of A that B does not hold, on one line
    only_in() { awk -v b="$2" 'FILENAME == b { h[$0] = 1; next } !($0 in h)' "$2" "$1" | head -n 3 | tr '\n' ';'; }
    grep -v -e '^#' -e '^moved ' "$ASIDE/manifest" >"$T/aside.want" || true
    for n in $back; do
        if [ -e "$IDIR/$n" ] || [ -L "$IDIR/$n" ]; then gvz_describe "$IDIR" "$n"; fi
    done >"$T/aside.got"
    if cmp -s "$T/aside.want" "$T/aside.got"; then
        gvz_log "gave back $(for n in $back; do printf '%s ' "$INSTALL_DIR/$n"; done)as install-runsc found them (type, mode, owner, sha512 as its manifest records)"
    else
        gvz_log "WARNING: gave back what $INSTALL_DIR/.gvisorgen-foreign/ held, but it is not what install-runsc moved aside (changed or removed meanwhile); recorded: $(only_in "$T/aside.want" "$T/aside.got") found: $(only_in "$T/aside.got" "$T/aside.want")"
    fi
    rm -f "$ASIDE/manifest"
    if [ -z "$(ls -A "$ASIDE")" ]; then rmdir "$ASIDE"; else gvz_log "$INSTALL_DIR/.gvisorgen-foreign holds more than install-runsc put there; left in place"; fi
fi
gvz_log "done: gVisor is removed from this node"
