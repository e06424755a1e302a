package expr

import "strings"

// Parts: a template as the literal text the shell or the database will see
// and the references between it, for the renderers that must know where
// each reference stands (inside quotes, in a comment, …) before deciding
// what to write in its place.

// RefKind tells calendar references, whose values tidemark generates, from
// free text.
type RefKind int

const (
	// Calendar references (${bizdate}, ${biztime-1h:HH}, ${cyctime}) render
	// to digits and the characters of their format, which may only be
	// letters, digits, space and _ . : / , + - (see SafeFormatChars).
	Calendar RefKind = iota
	// Param references (${param.NAME}, ${NAME}) are free text.
	Param
	// Output references (${outputs.TASK.NAME}) are free text.
	Output
)

// SafeFormatChars are the characters a time format may hold besides its
// tokens: none of them means anything to a shell or to SQL on its own, so a
// calendar value may be written anywhere in a command.
const SafeFormatChars = " _.:/,+-"

// Ref is one reference of a template.
type Ref struct {
	Text   string // "${…}" as written
	Offset int    // byte offset in the template
	Kind   RefKind
	Name   string // parameter or output name; the time name for Calendar
	Task   string // Output: the upstream task, by name or ID as written
	ref    *ref
}

// Free reports whether the reference's value is free text (a parameter or
// an output), which must never become code.
func (r Ref) Free() bool { return r.Kind != Calendar }

// Value renders the reference in env.
func (r Ref) Value(env Env) (string, error) {
	var b strings.Builder
	if err := r.ref.render(&b, env); err != nil {
		return "", err
	}
	return b.String(), nil
}

// Part is literal text or one reference; exactly one of Lit and Ref is set.
type Part struct {
	Lit string // "$${" already reads "${"
	Ref *Ref
}

// Parse splits tmpl into literal text and references. Its error is
// Validate's syntax error.
func Parse(tmpl string) ([]Part, error) {
	var parts []Part
	err := scan(tmpl, func(lit string) {
		if lit == "" {
			return
		}
		if n := len(parts); n > 0 && parts[n-1].Ref == nil {
			parts[n-1].Lit += lit
			return
		}
		parts = append(parts, Part{Lit: lit})
	}, func(r *ref) error {
		parts = append(parts, Part{Ref: &Ref{Text: r.text, Offset: r.off, Kind: r.kind.public(), Name: r.name, Task: r.task, ref: r}})
		return nil
	})
	return parts, err
}

func (k refKind) public() RefKind {
	switch k {
	case refParam:
		return Param
	case refOutput:
		return Output
	}
	return Calendar
}
