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
