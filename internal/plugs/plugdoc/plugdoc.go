// Package plugdoc is the reference of a plug, as blaise-agent doc shows it:
// name, description, handlers, whether it resumes, and the fields of its
// inputs and persisted schemas with their types, defaults and docs.
package plugdoc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"text/tabwriter"

	"github.com/blaiseagent/blaise-agent/interp"
)

// Reference is what a plug declares about itself.
type Reference struct {
	Ref         string   `json:"ref"`
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Handlers    []string `json:"handlers"`
	Resumable   bool     `json:"resumable"`
	Extensions  bool     `json:"extensions"`
	Inputs      []Field  `json:"inputs"`
	Persisted   []Field  `json:"persisted"`
	// Actions are the actions the plug offers (docs/plugs.md#actions).
	Actions []Action `json:"actions,omitempty"`
}

// Action is an action a plug offers: its name, its doc and its arguments.
type Action struct {
	Name string  `json:"name"`
	Doc  string  `json:"doc,omitempty"`
	Args []Field `json:"args"`
}

// Field is one field of a schema, a nested one named by its path (a.b).
type Field struct {
	Path     string          `json:"path"`
	Type     string          `json:"type"`
	Required bool            `json:"required"`
	Default  json.RawMessage `json:"default,omitempty"`
	Doc      string          `json:"doc,omitempty"`
	// literal is the default as Starlark writes it, for text and markdown.
	literal string
}

// Of returns the reference of p, which ref named.
func Of(ref string, p *interp.Plug) (*Reference, error) {
	r := &Reference{Ref: ref, Name: p.Name, Description: p.Description, Handlers: p.Handlers(), Resumable: p.Resumable, Extensions: p.Extensions, Inputs: []Field{}, Persisted: []Field{}}
	var err error
	if r.Inputs, err = fields(p.Inputs, ""); err != nil {
		return nil, fmt.Errorf("%s: inputs: %w", ref, err)
	}
	if r.Persisted, err = fields(p.Persisted, ""); err != nil {
		return nil, fmt.Errorf("%s: persisted: %w", ref, err)
	}
	for _, name := range p.ActionNames() {
		s := p.Actions[name]
		args, err := fields(s, "")
		if err != nil {
			return nil, fmt.Errorf("%s: actions[%q]: %w", ref, name, err)
		}
		r.Actions = append(r.Actions, Action{Name: name, Doc: s.Doc(), Args: args})
	}
	return r, nil
}

// fields lists the fields of an object schema, depth first, the fields of
// objects in lists and dicts as a[].b and a{}.b; a schema that is not an
// object is one field named by prefix ("" for the whole value).
func fields(s *interp.Schema, prefix string) ([]Field, error) {
	out := []Field{}
	if s == nil {
		return out, nil
	}
	if s.Kind() != interp.KindObject {
		f, err := field(s, prefix)
		return append(out, f), err
	}
	for name, fs := range s.Fields() {
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		f, err := field(fs, path)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
		if obj, at := objectIn(fs, path); obj != nil {
			nested, err := fields(obj, at)
			if err != nil {
				return nil, err
			}
			out = append(out, nested...)
		}
	}
	return out, nil
}

// objectIn returns the object schema that s is, or holds as its items,
// values or optional value, and the path of its fields.
func objectIn(s *interp.Schema, path string) (*interp.Schema, string) {
	switch s.Kind() {
	case interp.KindObject:
		return s, path
	case interp.KindList:
		return objectIn(s.Elem(), path+"[]")
	case interp.KindDict:
		return objectIn(s.Elem(), path+"{}")
	case interp.KindOptional:
		return objectIn(s.Elem(), path)
	}
	return nil, ""
}

// kind names a schema whose fields are listed after it: "list of object".
func kind(s *interp.Schema) string {
	switch s.Kind() {
	case interp.KindObject:
		return "object"
	case interp.KindList:
		return "list of " + kind(s.Elem())
	case interp.KindDict:
		return "dict of " + kind(s.Elem())
	case interp.KindOptional:
		return kind(s.Elem()) + " or None"
	}
	return s.Describe()
}

func field(s *interp.Schema, path string) (Field, error) {
	f := Field{Path: path, Type: s.Describe(), Doc: s.Doc(), Required: true}
	if obj, _ := objectIn(s, path); obj != nil {
		f.Type = kind(s)
	}
	if v, ok := s.Default(); ok {
		f.Required = false
		data, err := interp.AppendJSON(nil, v, path)
		if err != nil {
			return f, err
		}
		f.Default, f.literal = data, v.String()
	} else if s.Kind() == interp.KindOptional {
		f.Required = false
	}
	return f, nil
}

// Load returns the references of the plugs that refs name (blaise:NAME or
// paths), or with none, of every plug of the loader's standard library.
func Load(l *interp.Loader, refs []string) ([]*Reference, error) {
	all := len(refs) == 0
	if all && l.Stdlib != nil {
		names, err := fs.Glob(l.Stdlib, "*.star")
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			refs = append(refs, interp.StdlibPrefix+strings.TrimSuffix(n, ".star"))
		}
	}
	var out []*Reference
	for _, ref := range refs {
		p, err := l.LoadPlug(ref)
		if err != nil {
			if errors.Is(err, interp.ErrNotAPlug) {
				if all {
					continue // a module for load()
				}
				return nil, fmt.Errorf("%s is a module, for load(%q, …) in a plug or a configuration, not a plug: doc shows plugs (%w)", ref, ref, err)
			}
			return nil, err
		}
		r, err := Of(ref, p)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Formats are the formats Write knows.
var Formats = []string{"text", "markdown", "json"}

// Write writes the references in format: text, markdown or json (an
// array).
func Write(w io.Writer, refs []*Reference, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(refs)
	case "markdown":
		for i, r := range refs {
			if i > 0 {
				fmt.Fprintln(w)
			}
			r.markdown(w)
		}
		return nil
	case "text":
		for i, r := range refs {
			if i > 0 {
				fmt.Fprintln(w)
			}
			if err := r.text(w); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown format %q (want %s)", format, strings.Join(Formats, ", "))
}

// summary is the line of handlers and resumability.
func (r *Reference) summary() string {
	resume := "can resume"
	if !r.Resumable {
		resume = "cannot resume (resumable = False)"
	}
	handlers := "no handlers"
	if len(r.Handlers) > 0 {
		handlers = "handlers: " + strings.Join(r.Handlers, ", ")
	}
	if r.Extensions {
		handlers += " (on_message sees extension methods)"
	}
	return handlers + "; " + resume
}

func (r *Reference) text(w io.Writer) error {
	fmt.Fprintf(w, "%s (%s)\n", r.Name, r.Ref)
	if r.Description != "" {
		fmt.Fprintf(w, "  %s\n", r.Description)
	}
	fmt.Fprintf(w, "  %s\n", r.summary())
	for _, s := range []struct {
		title  string
		fields []Field
	}{{"inputs", r.Inputs}, {"persisted", r.Persisted}} {
		if len(s.fields) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", s.title)
		var table strings.Builder
		tw := tabwriter.NewWriter(&table, 0, 4, 2, ' ', 0)
		for _, f := range s.fields {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", f.name(), f.Type, f.dflt(), f.Doc)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		// A field without a doc would end in the padding of its default.
		for line := range strings.Lines(table.String()) {
			if _, err := fmt.Fprintln(w, strings.TrimRight(line, " \n")); err != nil {
				return err
			}
		}
	}
	if len(r.Actions) > 0 {
		fmt.Fprintf(w, "\nactions:\n")
		for _, a := range r.Actions {
			fmt.Fprintf(w, "  %s%s: %s\n", a.Name, a.argList(), a.Doc)
		}
	}
	return nil
}

// argList is the action's arguments as a command line gives them:
// " [--stat bool = False]".
func (a Action) argList() string {
	var b strings.Builder
	for _, f := range a.Args {
		fmt.Fprintf(&b, " [--%s %s", f.name(), f.Type)
		if d := f.dflt(); d != "" && d != "(required)" {
			fmt.Fprintf(&b, " = %s", d)
		}
		b.WriteString("]")
	}
	return b.String()
}

func (r *Reference) markdown(w io.Writer) {
	fmt.Fprintf(w, "### Reference: `%s`\n\n", r.Ref)
	if r.Description != "" {
		fmt.Fprintf(w, "%s\n\n", r.Description)
	}
	fmt.Fprintf(w, "`%s`: %s.\n", r.Name, r.summary())
	for _, s := range []struct {
		title  string
		fields []Field
	}{{"input", r.Inputs}, {"persisted", r.Persisted}} {
		if len(s.fields) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n| %s | type | default | description |\n| --- | --- | --- | --- |\n", s.title)
		for _, f := range s.fields {
			dflt := f.dflt()
			if dflt != "" && dflt != "(required)" {
				dflt = "`" + dflt + "`"
			}
			fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", f.name(), cell(f.Type), dflt, cell(f.Doc))
		}
	}
	if len(r.Actions) > 0 {
		fmt.Fprintf(w, "\n| action | arguments | description |\n| --- | --- | --- |\n")
		for _, a := range r.Actions {
			args := strings.TrimSpace(a.argList())
			if args != "" {
				args = "`" + strings.ReplaceAll(args, "] [", "]` `[") + "`"
			}
			fmt.Fprintf(w, "| `%s` | %s | %s |\n", a.Name, cell(args), cell(a.Doc))
		}
	}
}

// name is the field's path, or "(value)" for a schema that is not an
// object.
func (f Field) name() string {
	if f.Path == "" {
		return "(value)"
	}
	return f.Path
}

func (f Field) dflt() string {
	switch {
	case f.Default != nil:
		return f.literal
	case f.Required:
		return "(required)"
	}
	return ""
}

// cell escapes what would break a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "*", `\*`, "\n", " ").Replace(s)
}
