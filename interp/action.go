package interp

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"go.starlark.net/starlark"
)

// actionName is what an action may be called: a word a command line can
// take as it is (sessions do ID NAME).
var actionName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]*$`) })

// actionSchemas reads plug(actions = {"name": schema.object(...)}): each
// action's arguments, as an object schema whose doc says what it does.
func actionSchemas(v starlark.Value) (map[string]*Schema, error) {
	if v == starlark.None {
		return nil, nil
	}
	d, ok := v.(*starlark.Dict)
	if !ok {
		return nil, fmt.Errorf(`plug: actions: want a dict of action names to schema.object(...), got %s`, v.Type())
	}
	out := make(map[string]*Schema, d.Len())
	for _, item := range d.Items() {
		name, ok := starlark.AsString(item[0])
		if !ok {
			return nil, fmt.Errorf("plug: actions: want string keys, got %s", item[0].Type())
		}
		if !actionName().MatchString(name) {
			return nil, fmt.Errorf("plug: actions[%q]: an action's name is lower case letters, digits, _ and -, starting with a letter", name)
		}
		s, ok := item[1].(*Schema)
		if !ok || s.Kind() != KindObject {
			return nil, fmt.Errorf("plug: actions[%q]: want schema.object(...) of the action's arguments, got %s", name, item[1].Type())
		}
		out[name] = s
	}
	return out, nil
}

// ActionNames lists the actions p offers, sorted.
func (p *Plug) ActionNames() []string {
	names := make([]string, 0, len(p.Actions))
	for name := range p.Actions {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// OfferedAction is an action a plug of a configuration offers.
type OfferedAction struct {
	Name string
	Use  *Use
	Args *Schema
}

// QualifiedName is the name that picks the action whatever else the chain
// offers: ID.NAME with the plug's id, else NAME.
func (a OfferedAction) QualifiedName() string {
	if a.Use.ID != "" {
		return a.Use.ID + "." + a.Name
	}
	return a.Name
}

// ActionNames are the names a person gives the actions of the chain: NAME,
// or ID.NAME where several plugs offer NAME; in chain order.
func (c *Config) ActionNames() []string {
	all := c.Actions()
	count := map[string]int{}
	for _, a := range all {
		count[a.Name]++
	}
	names := make([]string, len(all))
	for i, a := range all {
		names[i] = a.Name
		if count[a.Name] > 1 {
			names[i] = a.QualifiedName()
		}
	}
	return names
}

// Actions lists the actions the plugs of the chain offer, in chain order.
func (c *Config) Actions() []OfferedAction {
	var out []OfferedAction
	for _, u := range c.Uses {
		for _, name := range u.Plug.ActionNames() {
			out = append(out, OfferedAction{Name: name, Use: u, Args: u.Plug.Actions[name]})
		}
	}
	return out
}

// FindAction finds the action called name (NAME, or ID.NAME for the plug
// whose id is ID): an unknown or ambiguous name is an error listing the
// actions there are.
func (c *Config) FindAction(name string) (OfferedAction, error) {
	all := c.Actions()
	var found []OfferedAction
	for _, a := range all {
		if a.Name == name || (a.Use.ID != "" && a.Use.ID+"."+a.Name == name) {
			found = append(found, a)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		if len(all) == 0 {
			return OfferedAction{}, fmt.Errorf("unknown action %q: no plug of the configuration offers actions", name)
		}
		names := c.ActionNames()
		msg := fmt.Sprintf("unknown action %q; the actions are: %s", name, strings.Join(names, ", "))
		if near := Nearest(name, names); near != "" {
			msg = fmt.Sprintf("unknown action %q (did you mean %s?); the actions are: %s", name, near, strings.Join(names, ", "))
		}
		return OfferedAction{}, fmt.Errorf("%s", msg)
	}
	names := make([]string, len(found))
	for i, a := range found {
		names[i] = a.QualifiedName()
	}
	return OfferedAction{}, fmt.Errorf("action %q is offered by several plugs: name one of %s", name, strings.Join(names, ", "))
}
