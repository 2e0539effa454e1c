package builtins

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/blaiseagent/blaise-agent/interp"
)

// reModule is `re`: regular expressions backed by Go's regexp, RE2 syntax
// (no backreferences or lookaround, matching in linear time). Names follow
// Python's re where the two agree; replacement templates are Go's ($1,
// ${name}), and a Python-style \1 in one is refused with that hint.
var reModule = &starlarkstruct.Module{
	Name: "re",
	Members: starlark.StringDict{
		"compile":   starlark.NewBuiltin("re.compile", reCompile),
		"escape":    starlark.NewBuiltin("re.escape", reEscape),
		"findall":   reFunc("findall"),
		"fullmatch": reFunc("fullmatch"),
		"match":     reFunc("match"),
		"search":    reFunc("search"),
		"split":     reFunc("split"),
		"sub":       reFunc("sub"),
	},
}

// Pattern is a compiled regular expression, the value of re.compile.
type Pattern struct {
	interp.Inert

	re *regexp.Regexp
	// anchored and full match at the start, and the whole string: match
	// and fullmatch.
	anchored, full *regexp.Regexp
}

var _ starlark.HasAttrs = (*Pattern)(nil)

func (p *Pattern) String() string        { return fmt.Sprintf("re.compile(%q)", p.re.String()) }
func (p *Pattern) Type() string          { return "re.pattern" }
func (p *Pattern) Hash() (uint32, error) { return starlark.String(p.re.String()).Hash() }

var patternMethods = map[string]*starlark.Builtin{
	"findall":   starlark.NewBuiltin("findall", patternFindall),
	"fullmatch": starlark.NewBuiltin("fullmatch", patternFullmatch),
	"match":     starlark.NewBuiltin("match", patternMatch),
	"search":    starlark.NewBuiltin("search", patternSearch),
	"split":     starlark.NewBuiltin("split", patternSplit),
	"sub":       starlark.NewBuiltin("sub", patternSub),
}

func (p *Pattern) Attr(name string) (starlark.Value, error) {
	if name == "pattern" {
		return starlark.String(p.re.String()), nil
	}
	if name == "groups" {
		return starlark.MakeInt(p.re.NumSubexp()), nil
	}
	if b := patternMethods[name]; b != nil {
		return b.BindReceiver(p), nil
	}
	return nil, nil
}

func (p *Pattern) AttrNames() []string {
	return append(methodNames(patternMethods), "groups", "pattern")
}

// compilePattern compiles src, naming the pattern in the error.
func compilePattern(src string) (*Pattern, error) {
	re, err := regexp.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("bad pattern %q: %s", src, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	// \A and \z, not ^ and $: those follow (?m).
	return &Pattern{
		re:       re,
		anchored: regexp.MustCompile(`\A(?:` + src + `)`),
		full:     regexp.MustCompile(`\A(?:` + src + `)\z`),
	}, nil
}

// patternCache keeps the patterns that module-level functions compiled, so
// that a handler matching every message compiles its pattern once.
var patternCache struct {
	sync.Mutex
	m map[string]*Pattern
}

const patternCacheSize = 256

func cachedPattern(src string) (*Pattern, error) {
	patternCache.Lock()
	p := patternCache.m[src]
	patternCache.Unlock()
	if p != nil {
		return p, nil
	}
	p, err := compilePattern(src)
	if err != nil {
		return nil, err
	}
	patternCache.Lock()
	if patternCache.m == nil || len(patternCache.m) >= patternCacheSize {
		patternCache.m = map[string]*Pattern{}
	}
	patternCache.m[src] = p
	patternCache.Unlock()
	return p, nil
}

// patternArg unpacks a pattern: a string, compiled, or a Pattern.
type patternArg struct{ p *Pattern }

func (a *patternArg) Unpack(v starlark.Value) error {
	switch v := v.(type) {
	case *Pattern:
		a.p = v
		return nil
	case starlark.String:
		p, err := cachedPattern(string(v))
		a.p = p
		return err
	}
	return fmt.Errorf("want a string or re.pattern, got %s", v.Type())
}

func reCompile(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var src string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "pattern", &src); err != nil {
		return nil, err
	}
	p, err := compilePattern(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Name(), err)
	}
	return p, nil
}

func reEscape(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var s string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "s", &s); err != nil {
		return nil, err
	}
	return starlark.String(regexp.QuoteMeta(s)), nil
}

// reFunc is the module-level form of a pattern method: re.NAME(pattern,
// …) is re.compile(pattern).NAME(…).
func reFunc(name string) *starlark.Builtin {
	method := patternMethods[name]
	return starlark.NewBuiltin("re."+name, func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var pat patternArg
		if len(args) == 0 {
			return nil, fmt.Errorf("%s: missing argument for pattern", b.Name())
		}
		if err := pat.Unpack(args[0]); err != nil {
			return nil, fmt.Errorf("%s: for parameter pattern: %w", b.Name(), err)
		}
		return method.BindReceiver(pat.p).CallInternal(thread, args[1:], kwargs)
	})
}

func receiver(b *starlark.Builtin) *Pattern { return b.Receiver().(*Pattern) }

// matchWith matches s with one of the pattern's expressions.
func matchWith(b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple, which func(*Pattern) *regexp.Regexp) (starlark.Value, error) {
	var s string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "string", &s); err != nil {
		return nil, err
	}
	p := receiver(b)
	loc := which(p).FindStringSubmatchIndex(s)
	if loc == nil {
		return starlark.None, nil
	}
	return &Match{s: s, loc: loc, p: p}, nil
}

func patternMatch(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	return matchWith(b, args, kwargs, func(p *Pattern) *regexp.Regexp { return p.anchored })
}

func patternFullmatch(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	return matchWith(b, args, kwargs, func(p *Pattern) *regexp.Regexp { return p.full })
}

func patternSearch(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	return matchWith(b, args, kwargs, func(p *Pattern) *regexp.Regexp { return p.re })
}

// patternFindall returns, as Python's does, the matches when the pattern
// has no group, the first group's text when it has one, and tuples of the
// groups when it has more.
func patternFindall(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var s string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "string", &s); err != nil {
		return nil, err
	}
	p := receiver(b)
	var out []starlark.Value
	for _, loc := range p.re.FindAllStringSubmatchIndex(s, -1) {
		m := &Match{s: s, loc: loc, p: p}
		switch n := p.re.NumSubexp(); n {
		case 0:
			out = append(out, starlark.String(s[loc[0]:loc[1]]))
		case 1:
			out = append(out, m.text(1, starlark.String("")))
		default:
			out = append(out, m.groups(starlark.String("")))
		}
	}
	return starlark.NewList(out), nil
}

// patternSplit splits s around the matches; the text of the pattern's
// groups is kept between the pieces, as Python's does.
func patternSplit(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var s string
	maxsplit := 0
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "string", &s, "maxsplit?", &maxsplit); err != nil {
		return nil, err
	}
	p := receiver(b)
	n := -1
	if maxsplit > 0 {
		n = maxsplit
	}
	var out []starlark.Value
	last := 0
	for _, loc := range p.re.FindAllStringSubmatchIndex(s, n) {
		out = append(out, starlark.String(s[last:loc[0]]))
		m := &Match{s: s, loc: loc, p: p}
		for g := 1; g <= p.re.NumSubexp(); g++ {
			out = append(out, m.text(g, starlark.None))
		}
		last = loc[1]
	}
	out = append(out, starlark.String(s[last:]))
	return starlark.NewList(out), nil
}

// patternSub replaces the matches in s with repl: a template in Go's
// syntax ($1, ${name}, $$ for a dollar) or a function of the match that
// returns a string; count > 0 replaces at most that many.
func patternSub(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var repl starlark.Value
	var s string
	count := 0
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "repl", &repl, "string", &s, "count?", &count); err != nil {
		return nil, err
	}
	var template string
	fn, isFunc := repl.(starlark.Callable)
	if !isFunc {
		t, ok := starlark.AsString(repl)
		if !ok {
			return nil, fmt.Errorf("%s: for parameter repl: want a string or a function, got %s", b.Name(), repl.Type())
		}
		if pythonGroupRef().MatchString(t) {
			return nil, fmt.Errorf("%s: replacement %q refers to a group Python's way; Go's templates write $1 or ${name} (and $$ for a dollar)", b.Name(), t)
		}
		template = t
	}
	p := receiver(b)
	n := -1
	if count > 0 {
		n = count
	}
	var out []byte
	last := 0
	for _, loc := range p.re.FindAllStringSubmatchIndex(s, n) {
		out = append(out, s[last:loc[0]]...)
		if isFunc {
			v, err := starlark.Call(thread, fn, starlark.Tuple{&Match{s: s, loc: loc, p: p}}, nil)
			if err != nil {
				return nil, err
			}
			r, ok := starlark.AsString(v)
			if !ok {
				return nil, fmt.Errorf("%s: the replacement function returned %s, want a string", b.Name(), v.Type())
			}
			out = append(out, r...)
		} else {
			out = p.re.ExpandString(out, template, s, loc)
		}
		last = loc[1]
	}
	out = append(out, s[last:]...)
	return starlark.String(out), nil
}

// pythonGroupRef finds \1 or \g<…> in a replacement template.
var pythonGroupRef = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\\(?:[0-9]|g<)`) })

// Match is a successful match: what match, search and fullmatch return,
// and what a replacement function of sub receives.
type Match struct {
	interp.Opaque[*Match]

	s   string
	loc []int // as FindStringSubmatchIndex returns it
	p   *Pattern
}

var _ starlark.HasAttrs = (*Match)(nil)

func (m *Match) String() string {
	return fmt.Sprintf("re.match(span = (%d, %d), match = %q)", m.loc[0], m.loc[1], m.s[m.loc[0]:m.loc[1]])
}
func (m *Match) Type() string { return "re.match" }

var matchMethods = map[string]*starlark.Builtin{
	"end":       starlark.NewBuiltin("end", matchEnd),
	"group":     starlark.NewBuiltin("group", matchGroup),
	"groupdict": starlark.NewBuiltin("groupdict", matchGroupdict),
	"groups":    starlark.NewBuiltin("groups", matchGroups),
	"span":      starlark.NewBuiltin("span", matchSpan),
	"start":     starlark.NewBuiltin("start", matchStart),
}

func (m *Match) Attr(name string) (starlark.Value, error) {
	if name == "string" {
		return starlark.String(m.s), nil
	}
	if b := matchMethods[name]; b != nil {
		return b.BindReceiver(m), nil
	}
	return nil, nil
}

func (m *Match) AttrNames() []string { return append(methodNames(matchMethods), "string") }

// text is group g's text, or unmatched for a group that took no part.
func (m *Match) text(g int, unmatched starlark.Value) starlark.Value {
	if m.loc[2*g] < 0 {
		return unmatched
	}
	return starlark.String(m.s[m.loc[2*g]:m.loc[2*g+1]])
}

func (m *Match) groups(unmatched starlark.Value) starlark.Tuple {
	out := make(starlark.Tuple, m.p.re.NumSubexp())
	for i := range out {
		out[i] = m.text(i+1, unmatched)
	}
	return out
}

// groupArg unpacks a group: its number or its name.
type groupArg struct {
	m *Match
	g int
}

func (a *groupArg) Unpack(v starlark.Value) error {
	re := a.m.p.re
	switch v := v.(type) {
	case starlark.Int:
		g, ok := v.Int64()
		if !ok || g < 0 || int(g) > re.NumSubexp() {
			return fmt.Errorf("no group %s: the pattern %q has %d", v, re.String(), re.NumSubexp())
		}
		a.g = int(g)
		return nil
	case starlark.String:
		if g := re.SubexpIndex(string(v)); g > 0 {
			a.g = g
			return nil
		}
		return fmt.Errorf("no group named %s in the pattern %q", v, re.String())
	}
	return fmt.Errorf("want a group number or name, got %s", v.Type())
}

func matchGroup(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	m := b.Receiver().(*Match)
	if len(kwargs) > 0 {
		return nil, fmt.Errorf("%s: unexpected keyword arguments", b.Name())
	}
	if len(args) == 0 {
		return m.text(0, starlark.None), nil
	}
	out := make(starlark.Tuple, len(args))
	for i, v := range args {
		g := groupArg{m: m}
		if err := g.Unpack(v); err != nil {
			return nil, fmt.Errorf("%s: %w", b.Name(), err)
		}
		out[i] = m.text(g.g, starlark.None)
	}
	if len(out) == 1 {
		return out[0], nil
	}
	return out, nil
}

func matchGroups(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var unmatched starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "default?", &unmatched); err != nil {
		return nil, err
	}
	return b.Receiver().(*Match).groups(unmatched), nil
}

func matchGroupdict(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var unmatched starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "default?", &unmatched); err != nil {
		return nil, err
	}
	m := b.Receiver().(*Match)
	d := starlark.NewDict(0)
	for g, name := range m.p.re.SubexpNames() {
		if name != "" {
			_ = d.SetKey(starlark.String(name), m.text(g, unmatched))
		}
	}
	return d, nil
}

// bound unpacks the optional group of start, end and span.
func bound(b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (start, end int, err error) {
	m := b.Receiver().(*Match)
	g := groupArg{m: m}
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "group?", &g); err != nil {
		return 0, 0, err
	}
	return m.loc[2*g.g], m.loc[2*g.g+1], nil
}

func matchStart(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	start, _, err := bound(b, args, kwargs)
	return starlark.MakeInt(start), err
}

func matchEnd(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	_, end, err := bound(b, args, kwargs)
	return starlark.MakeInt(end), err
}

func matchSpan(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	start, end, err := bound(b, args, kwargs)
	if err != nil {
		return nil, err
	}
	return starlark.Tuple{starlark.MakeInt(start), starlark.MakeInt(end)}, nil
}

// methodNames lists the names of a method table, sorted.
func methodNames(methods map[string]*starlark.Builtin) []string {
	names := make([]string, 0, len(methods))
	for name := range methods {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
