package schema

// tidy removes from the encoder's output what would make a correct values
// file look wrong in an editor, or says nothing:
//   - "required": a values file is a part of a target (its profile, the
//     targets/ file and each -f file add up), so no field is required of one
//     file; what a target must end up with is evaluation's rule;
//   - definitions that allow anything (a derived field such as
//     policy.requirePins refers to #ProfileFacts[profile], which the encoder
//     cannot follow), and the references to them.
func tidy(root map[string]any) {
	defs, _ := root["$defs"].(map[string]any)
	anything := map[string]bool{}
	for name, d := range defs {
		if d == true {
			anything["#/$defs/"+name] = true
			delete(defs, name)
		}
	}
	var walk func(x any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			delete(x, "required")
			if any, ok := x["anyOf"].([]any); ok {
				for _, y := range any {
					if y == true {
						delete(x, "anyOf") // anything or something: anything
						break
					}
				}
			}
			if ref, ok := x["$ref"].(string); ok && anything[ref] {
				delete(x, "$ref")
			}
			for _, y := range x {
				walk(y)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	walk(root)
}
