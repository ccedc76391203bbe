#!/bin/sh
# classes.sh: the sandbox classes beyond the default one (RUNSC_CLASSES), sourced after lib.sh by configure-containerd,
# uninstall-runsc and runsc-ready. The default class is the runsc handler with RUNSC_CONFIG and RUNSC_CONFIG_TOML; each
# further class is a handler runsc-<suffix> whose runsc.toml sits beside RUNSC_CONFIG as <handler>.toml. RUNSC_CLASSES
# holds, per class, a `[handler]` line and then its `key = value` lines for [runsc_config] (cue/classes.cue renders it).

# gvz_check_classes : refuses a RUNSC_CLASSES that is not [handler] lines each followed by key = value lines, a handler
# that is not runsc-<suffix> (lowercase letters, digits and -, at most 56 characters, not runsc-version: the values
# schema's #ClassHandler, held to the same corpus by ci/node's contract test), or one handler twice. Sets GVZ_CLASSES
# to the handlers, space-separated, in order.
gvz_check_classes() {
    GVZ_CLASSES=
    [ -n "$RUNSC_CLASSES" ] || return 0
    _gvz_first=1
    _gvz_out=$(printf '%s\n' "$RUNSC_CLASSES" | while IFS= read -r _l; do
        case $_l in
        '') continue ;;
        \[*\])
            _h=${_l#\[}
            _h=${_h%\]}
            printf 'h:%s\n' "$_h"
            ;;
        *)
            if [ -n "$_gvz_first" ]; then echo "!line before the first [handler]: $_l"; fi
            printf '%s\n' "$_l" | grep -qE '^[a-z][a-z0-9-]* = [^[:space:]].*$' || echo "!not a 'key = value' line: $_l"
            ;;
        esac
        _gvz_first=
    done)
    _bad=$(printf '%s\n' "$_gvz_out" | sed -n 's/^!//p' | head -n 1)
    [ -z "$_bad" ] || gvz_die "RUNSC_CLASSES must hold [handler] lines, each followed by 'key = value' lines for [runsc_config]: $_bad"
    while IFS= read -r _h; do
        case $_h in h:*) _h=${_h#h:} ;; *) continue ;; esac
        gvz_is_class_handler "$_h" ||
            gvz_die "RUNSC_CLASSES names the handler '$_h': a class's handler is runsc-<suffix> (lowercase letters, digits and -, starting and ending with a letter or digit), at most 56 characters, and not runsc-version"
        case " $GVZ_CLASSES " in *" $_h "*) gvz_die "RUNSC_CLASSES names the handler $_h twice" ;; esac
        GVZ_CLASSES="$GVZ_CLASSES $_h"
    done <<EOF
$_gvz_out
EOF
    GVZ_CLASSES=${GVZ_CLASSES# }
}

# gvz_is_class_handler NAME : status 0 when NAME may be a further class's handler.
gvz_is_class_handler() {
    [ "${#1}" -le 56 ] && [ "$1" != runsc-version ] && printf '%s\n' "$1" | grep -qxE 'runsc-[a-z0-9]([-a-z0-9]*[a-z0-9])?'
}

# gvz_class_lines HANDLER : the [runsc_config] lines of HANDLER (RUNSC_CONFIG_TOML for runsc).
gvz_class_lines() {
    if [ "$1" = runsc ]; then
        if [ -n "$RUNSC_CONFIG_TOML" ]; then printf '%s\n' "$RUNSC_CONFIG_TOML"; fi
        return 0
    fi
    printf '%s\n' "$RUNSC_CLASSES" | awk -v h="[$1]" '/^\[.*\]$/ { on = ($0 == h); next } on && $0 != ""'
}

# gvz_class_config HANDLER : the host path of HANDLER's runsc.toml.
gvz_class_config() {
    if [ "$1" = runsc ]; then echo "$RUNSC_CONFIG"; else echo "${RUNSC_CONFIG%/*}/$1.toml"; fi
}

# gvz_class_files APPLIED : the further classes' runsc.toml files an applied marker records ("class HANDLER DIGEST
# PATH" lines), as "HANDLER DIGEST PATH".
gvz_class_files() {
    [ -f "$1" ] || return 0
    awk '$1 == "class" && NF == 4 { print $2, $3, $4 }' "$1"
}

# gvz_remove_class_config PATH DIGEST WHY : removes PATH, a further class's runsc.toml, when it is gvisorgen's own: a
# plain file beside RUNSC_CONFIG named runsc-<suffix>.toml with the managed header (and, when DIGEST is not "-", that
# digest). Anything else stays, with a line in the log.
gvz_remove_class_config() {
    _f=${1##*/}
    _h=${_f%.toml}
    if [ "${1%/*}" != "${RUNSC_CONFIG%/*}" ] || [ "$_f" = "$_h" ] || ! gvz_is_class_handler "$_h"; then
        gvz_log "$1 is not where gvisorgen writes a class's runsc.toml; not touching it"
        return 0
    fi
    if [ ! -e "$HOST_ROOT$1" ] && [ ! -L "$HOST_ROOT$1" ]; then return 0; fi
    if [ -f "$HOST_ROOT$1" ] && [ ! -L "$HOST_ROOT$1" ] && head -n 1 "$HOST_ROOT$1" | grep -q "^$GVZ_MANAGED" &&
        { [ "$2" = - ] || [ "$(gvz_sha512 "$HOST_ROOT$1")" = "$2" ]; }; then
        rm -f "$HOST_ROOT$1"
        gvz_log "removed $1 ($3)"
    else
        gvz_log "$1 is not gvisorgen's as recorded (edited since, or another writer's); left in place"
    fi
}

# ---------------------------------------------------------------------------------------------------------------
# Node checks of a class (RUNSC_CHECKS, cue/classes.cue #ClassChecks): its gate opens on this node only where they pass.

# gvz_check_gate_lines : refuses RUNSC_CHECKS lines that are not "<handler> <gate label> <check>...", with the handler
# runsc or one of RUNSC_CLASSES, the label node-restriction.kubernetes.io/gvisor-<handler>, each check nvidia-driver or
# kvm; and NODE_NAME set. Call after gvz_check_classes.
gvz_check_gate_lines() {
    [ -n "$RUNSC_CHECKS" ] || return 0
    # the Events about each checked class's gate name the node (the DaemonSet sets NODE_NAME from the downward API)
    [ -n "$NODE_NAME" ] || gvz_die "RUNSC_CHECKS is set but NODE_NAME is not: the Events about the checked classes name the node (the DaemonSet sets it from spec.nodeName)"
    while read -r _h _l _c; do
        [ -n "$_h" ] || continue
        case " runsc $GVZ_CLASSES " in *" $_h "*) ;; *) gvz_die "RUNSC_CHECKS names the handler '$_h', which is not runsc or a class of RUNSC_CLASSES" ;; esac
        [ "$_l" = "node-restriction.kubernetes.io/gvisor-$_h" ] || gvz_die "RUNSC_CHECKS gives the handler $_h the gate label '$_l'; want node-restriction.kubernetes.io/gvisor-$_h"
        [ -n "$_c" ] || gvz_die "RUNSC_CHECKS names no check for the handler $_h"
        for _x in $_c; do
            case $_x in nvidia-driver | kvm) ;; *) gvz_die "RUNSC_CHECKS names the check '$_x' for $_h; the installer knows nvidia-driver and kvm" ;; esac
        done
    done <<EOF
$RUNSC_CHECKS
EOF
}

# gvz_nvidia_version FILE : the driver version in the host's /proc/driver/nvidia/version (its "NVRM version:" line,
# e.g. "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.172.08  Release Build  (dvs-builder@U16)  ..."),
# nothing when FILE is missing or names none.
gvz_nvidia_version() {
    gvz_host cat "$1" 2>/dev/null |
        awk '/^NVRM version:/ { for (i = 3; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+(\.[0-9]+)?$/) { print $i; exit } }'
}

# gvz_version_norm : each dotted version on stdin without leading zeros in its parts (runsc prints 570.172.08 and
# 620.06.00; the driver names itself 570.172.08 too, but a comparison must not depend on the padding).
gvz_version_norm() {
    awk -F. '{ s = ""; for (i = 1; i <= NF; i++) s = s (i > 1 ? "." : "") ($i + 0); print s }'
}

# gvz_gate_nvidia : prints why the nvidia-driver check fails on this node (nothing when it passes): no driver, or one
# that the installed release's `runsc nvproxy list-supported-drivers` does not list.
gvz_gate_nvidia() {
    _drv=$(gvz_nvidia_version "$NVIDIA_DRIVER_VERSION_FILE")
    if [ -z "$_drv" ]; then
        echo "no NVIDIA driver on this node ($NVIDIA_DRIVER_VERSION_FILE names no NVRM version)"
        return 0
    fi
    _runsc=$GVZ_RELEASES/$GVISOR_VERSION/runsc
    # shellcheck disable=SC2086 # GVZ_HX is a command prefix, split on purpose
    if ! _list=$(timeout 30 $GVZ_HX "$_runsc" nvproxy list-supported-drivers 2>&1) ||
        ! printf '%s\n' "$_list" | grep -qE '^[0-9]+\.[0-9]+(\.[0-9]+)?$'; then
        echo "cannot tell which NVIDIA drivers gVisor $GVISOR_VERSION supports ($_runsc nvproxy list-supported-drivers: $(printf '%s' "$_list" | head -c 200))"
        return 0
    fi
    _want=$(echo "$_drv" | gvz_version_norm)
    if ! printf '%s\n' "$_list" | grep -E '^[0-9]+\.[0-9]+(\.[0-9]+)?$' | gvz_version_norm | grep -qxF "$_want"; then
        echo "the node's NVIDIA driver $_drv is not one that gVisor $GVISOR_VERSION supports (runsc nvproxy list-supported-drivers: $(printf '%s\n' "$_list" | grep -cE '^[0-9]') versions, $(printf '%s\n' "$_list" | grep -E '^[0-9]' | head -n 1) to $(printf '%s\n' "$_list" | grep -E '^[0-9]' | tail -n 1))"
    fi
}

# gvz_gate_kvm : prints why the kvm check fails (nothing when it passes): KVM_DEVICE must be a character device that
# opens read-write, as runsc's KVM platform opens it, and then the installed release's runsc must run a sandbox on it:
# `runsc --platform=kvm do true` within 15 s. A device that opens is not enough: a nested, paravirtualised /dev/kvm
# (a PVM host, 2026-12-06) opened and created VMs, and runsc's first vCPU run hung there; systrap's `do true` takes
# ~0.2 s, KVM's about as long where it works. Its state and scratch live in STATE_DIR/kvm-check, removed before and
# after (and by the next run, should this one be killed); a hung runsc is killed (SIGKILL: its sandbox, attached,
# dies with it). (The device test in a subshell: a failed redirection of a special built-in ends the shell that runs
# it.)
gvz_gate_kvm() {
    # shellcheck disable=SC2016 # expanded by the host shell
    if ! _e=$(gvz_host sh -c '[ -c "$1" ] || { echo "$1 is not a character device (no KVM on this node, or it is not passed to the host)"; exit 1; }; ( : <>"$1" ) 2>/dev/null || { echo "$1 does not open read-write (the kvm module is not loaded, or KVM is not usable here)"; exit 1; }' sh "$KVM_DEVICE" 2>&1); then
        echo "${_e:-$KVM_DEVICE is not usable}"
        return 0
    fi
    _runsc=$GVZ_RELEASES/$GVISOR_VERSION/runsc
    _kd=$STATE_DIR/kvm-check
    _rc=0
    # runsc's output goes to a file, not to this shell's pipe: a child of runsc that outlived it would hold the pipe,
    # and the check would wait for it
    # shellcheck disable=SC2016,SC2086 # expanded by the host shell; GVZ_HX is a command prefix, split on purpose
    timeout -s KILL 15 $GVZ_HX sh -c 'rm -rf "$1" && mkdir -p "$1/root" "$1/tmp" && TMPDIR=$1/tmp && export TMPDIR && exec "$2" --root="$1/root" --platform=kvm --platform_device_path="$3" --network=none do true >"$1/out" 2>&1 </dev/null' sh "$_kd" "$_runsc" "$KVM_DEVICE" >/dev/null 2>&1 </dev/null || _rc=$?
    _out=$(gvz_host cat "$_kd/out" 2>/dev/null | tail -n 3 | tr '\n\r\t' '   ' | head -c 300) || true
    gvz_host rm -rf "$_kd" 2>/dev/null || true
    case $_rc in
    0) ;;
    124 | 137) echo "runsc's KVM platform did not run a sandbox within 15 s on this node ($_runsc --platform=kvm --platform_device_path=$KVM_DEVICE do true was killed): $KVM_DEVICE opens, but KVM does not run gVisor here (a nested or paravirtualised KVM?)" ;;
    *) echo "runsc's KVM platform cannot run a sandbox on this node ($_runsc --platform=kvm do true: exit $_rc: $_out)" ;;
    esac
}

# gvz_class_gates OUT : runs every RUNSC_CHECKS line's checks on this node and writes "<handler> <gate label> open <checks>" or
# "<handler> <gate label> closed <why>" per line to OUT; logs each class that stays closed.
gvz_class_gates() {
    : >"$1"
    [ -n "$RUNSC_CHECKS" ] || return 0
    while read -r _h _l _c; do
        [ -n "$_h" ] || continue
        _why=
        for _x in $_c; do
            case $_x in
            nvidia-driver) _why=$(gvz_gate_nvidia) ;;
            kvm) _why=$(gvz_gate_kvm) ;;
            esac
            [ -z "$_why" ] || break
        done
        # one line, whatever the host printed (runsc's usage text, a panic): the gates file is a line per class
        _why=$(printf '%s' "$_why" | tr '\n\r\t' '   ')
        if [ -n "$_why" ]; then
            printf '%s %s closed %s\n' "$_h" "$_l" "$_why" >>"$1"
            gvz_log "the class with handler $_h stays closed on this node ($_l unset): $_why. Its handler is configured; new sandboxes of that class are scheduled only onto nodes where its checks pass, and running ones keep their release"
        else
            printf '%s %s open %s\n' "$_h" "$_l" "$_c" >>"$1"
            gvz_log "the class with handler $_h passed its checks ($_c) on this node: its gate $_l opens"
        fi
    done <<EOF
$RUNSC_CHECKS
EOF
}

# gvz_gate_patch GATES : the merge patch label-checked-classes applies to the node: each checked class's gate label,
# "true" where it is open, null (removed) where it is closed.
gvz_gate_patch() {
    awk 'BEGIN { printf "{\"metadata\":{\"labels\":{" } { printf "%s\"%s\":%s", (NR > 1 ? "," : ""), $2, ($3 == "open" ? "\"true\"" : "null") } END { print "}}}" }' "$1"
}

# gvz_gate_events GATES : the Events report-checked-classes creates (a v1 List, one Event per checked class, in the
# namespace "default", where Events about a Node go; `kubectl describe node` shows them): Warning SandboxClassClosed with
# the reason (the driver's and the release's versions for a GPU class), or Normal SandboxClassOpen. Bytes outside
# printable ASCII and backslashes are dropped, quotes escaped: the text comes from the host (runsc's output, a device
# path), and JSON must stay JSON whatever it says.
gvz_gate_events() {
    tr -cd '\12\40-\133\135-\176' <"$1" | awk -v node="$NODE_NAME" -v ver="$GVISOR_VERSION" -v ts="$(date -u +%Y-%m-%dT%H:%M:%SZ)" '
        function esc(s) { gsub(/"/, "\\\"", s); return s }
        BEGIN { printf "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[" }
        # only a gates line of gvz_class_gates: a handler, its gate label, open or closed
        $1 ~ /^runsc(-[a-z0-9]([-a-z0-9]*[a-z0-9])?)?$/ && $2 ~ /^node-restriction\.kubernetes\.io\/gvisor-runsc/ && ($3 == "open" || $3 == "closed") {
            rest = $0; sub(/^[^ ]+ [^ ]+ [^ ]+ ?/, "", rest); rest = substr(rest, 1, 700)
            if ($3 == "open") {
                type = "Normal"; reason = "SandboxClassOpen"
                msg = "the sandbox class with handler " $1 " passed its checks (" rest ") with gVisor " ver ": its gate " $2 " is set"
            } else {
                type = "Warning"; reason = "SandboxClassClosed"
                msg = "the sandbox class with handler " $1 " stays closed on this node (" $2 " unset): " rest
            }
            printf "%s{\"apiVersion\":\"v1\",\"kind\":\"Event\",\"metadata\":{\"generateName\":\"gvisorgen-%s.\",\"namespace\":\"default\"},", (n++ ? "," : ""), $1
            printf "\"involvedObject\":{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"%s\",\"uid\":\"%s\"},", esc(node), esc(node)
            printf "\"type\":\"%s\",\"reason\":\"%s\",\"message\":\"%s\",", type, reason, esc(msg)
            printf "\"source\":{\"component\":\"gvisorgen-runsc-installer\",\"host\":\"%s\"},", esc(node)
            printf "\"firstTimestamp\":\"%s\",\"lastTimestamp\":\"%s\",\"count\":1}", ts, ts
        }
        END { print "]}" }'
}
