package starfmt

import (
	"fmt"
	"math/big"
	"reflect"
	"sort"
	"strings"

	"go.starlark.net/syntax"
)

// shape writes what f means, leaving out what formatting may change:
// positions, comments, the spelling of literals, parentheses, and the
// order of consecutive load statements and of the names each loads
// (buildtools sorts them).
func shape(f *syntax.File) string {
	var b strings.Builder
	shapeStmts(&b, f.Stmts)
	return b.String()
}

func shapeStmts(b *strings.Builder, stmts []syntax.Stmt) {
	var loads []string
	flush := func() {
		sort.Strings(loads)
		for _, l := range loads {
			b.WriteString(l)
		}
		loads = nil
	}
	for _, s := range stmts {
		if l, ok := s.(*syntax.LoadStmt); ok {
			loads = append(loads, shapeLoad(l))
			continue
		}
		flush()
		shapeValue(b, reflect.ValueOf(s))
	}
	flush()
}

func shapeLoad(l *syntax.LoadStmt) string {
	seen := map[string]bool{}
	var pairs []string
	for i := range l.From {
		p := l.To[i].Name + "=" + l.From[i].Name
		if !seen[p] {
			seen[p] = true
			pairs = append(pairs, p)
		}
	}
	sort.Strings(pairs)
	return fmt.Sprintf("load(%q %s)\n", l.Module.Value, strings.Join(pairs, " "))
}

var (
	positionType = reflect.TypeOf(syntax.Position{})
	stmtsType    = reflect.TypeOf([]syntax.Stmt(nil))
)

func shapeValue(b *strings.Builder, v reflect.Value) {
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			b.WriteString("nil ")
			return
		}
		switch x := v.Interface().(type) {
		case *syntax.ParenExpr:
			shapeValue(b, reflect.ValueOf(x.X))
			return
		case *syntax.Ident:
			b.WriteString(x.Name + " ")
			return
		case *syntax.Literal:
			if n, ok := x.Value.(*big.Int); ok {
				fmt.Fprintf(b, "%s ", n)
			} else {
				fmt.Fprintf(b, "%s(%#v) ", x.Token, x.Value)
			}
			return
		}
		shapeValue(b, v.Elem())
	case reflect.Struct:
		b.WriteString(v.Type().Name() + "{")
		for i := 0; i < v.NumField(); i++ {
			if f := v.Type().Field(i); f.IsExported() && f.Type != positionType {
				shapeValue(b, v.Field(i))
			}
		}
		b.WriteString("} ")
	case reflect.Slice:
		if v.Type() == stmtsType {
			b.WriteString("[")
			shapeStmts(b, v.Interface().([]syntax.Stmt))
			b.WriteString("] ")
			return
		}
		b.WriteString("[")
		for i := 0; i < v.Len(); i++ {
			shapeValue(b, v.Index(i))
		}
		b.WriteString("] ")
	default:
		fmt.Fprintf(b, "%v ", v.Interface())
	}
}
