package eval

import (
	"fmt"

	"cuelang.org/go/cue"
)

// Profile is one entry of #ProfileFacts (cue/profiles.cue): what the
// generator knows of a cloud besides its defaults. The profile list is the
// keys of #ProfileFacts; every Go reader goes through DecodeProfiles.
type Profile struct {
	Name                  string   `json:"-"`
	Description           string   `json:"description"`
	RequirePins           bool     `json:"requirePins"`
	ManagedStorageClasses []string `json:"managedStorageClasses"`
}

// DecodeProfiles reads #ProfileFacts of a built module, in declaration order.
func DecodeProfiles(inst cue.Value) ([]Profile, error) {
	it, err := inst.LookupPath(cue.ParsePath("#ProfileFacts")).Fields()
	if err != nil {
		return nil, fmt.Errorf("#ProfileFacts: %w", err)
	}
	var out []Profile
	for it.Next() {
		var p Profile
		if err := it.Value().Decode(&p); err != nil {
			return nil, fmt.Errorf("#ProfileFacts.%s: %w", it.Selector(), err)
		}
		p.Name = it.Selector().Unquoted()
		out = append(out, p)
	}
	return out, nil
}

// ProfileFacts are the loaded module's profiles.
func (e *Evaluator) ProfileFacts() ([]Profile, error) { return DecodeProfiles(e.inst) }

// ProfileNames are the profiles, in the order #ProfileFacts declares them
// (none when it does not decode; the schema's own errors say why).
func (e *Evaluator) ProfileNames() []string {
	ps, _ := e.ProfileFacts()
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}
