package interp_test

import (
	"fmt"
	"slices"
	"testing"
)

const offersAction = `plug(name = "%s", actions = {"diff": schema.object(doc = "The changes.", stat = schema.bool(default = False))})
def on_action(ctx, action, next):
    return None
`

func TestActions_NeedOnAction(t *testing.T) {
	wantError(t, map[string]string{
		"blaise.star": agentLine + `setup(use("./p.star"))`,
		"p.star":      `plug(name = "p", actions = {"diff": schema.object()})` + "\n",
	}, "p.star:1:5: plug p: actions = {...} needs an on_action(ctx, action, next) handler that does them")
}

func TestActions_DeclarationErrorsNameTheAction(t *testing.T) {
	for decl, want := range map[string]string{
		`{"diff": {"stat": schema.bool()}}`: `plug: actions["diff"]: want schema.object(...) of the action's arguments, got dict`,
		`{"diff": schema.bool()}`:           `plug: actions["diff"]: want schema.object(...) of the action's arguments, got schema`,
		`{"Diff now": schema.object()}`:     `plug: actions["Diff now"]: an action's name is lower case letters, digits, _ and -, starting with a letter`,
		`[schema.object()]`:                 `plug: actions: want a dict of action names to schema.object(...), got list`,
		`{1: schema.object()}`:              `plug: actions: want string keys, got int`,
	} {
		wantError(t, map[string]string{
			"blaise.star": agentLine + `setup(use("./p.star"))`,
			"p.star":      `plug(name = "p", actions = ` + decl + ")\ndef on_action(ctx, action, next):\n    return None\n",
		}, want)
	}
}

func TestActions_FoundByNameOrIDWhenTwoPlugsOfferIt(t *testing.T) {
	cfg, err := load(t, map[string]string{
		"blaise.star": agentLine + `setup(use("./a.star", id = "a"), use("./b.star", id = "b"), use("./c.star"))`,
		"a.star":      fmt.Sprintf(offersAction, "acme/a"),
		"b.star":      fmt.Sprintf(offersAction, "acme/b"),
		"c.star":      `plug(name = "acme/c", actions = {"log": schema.object()})` + "\ndef on_action(ctx, action, next):\n    return None\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.ActionNames(), []string{"a.diff", "b.diff", "log"}; !slices.Equal(got, want) {
		t.Errorf("ActionNames() = %q, want %q", got, want)
	}
	if a, err := cfg.FindAction("b.diff"); err != nil || a.Use.ID != "b" {
		t.Errorf("FindAction(b.diff) = %v, %v; want the action of b", a.Use, err)
	}
	if a, err := cfg.FindAction("log"); err != nil || a.Use.Plug.Name != "acme/c" {
		t.Errorf("FindAction(log) = %v, %v; want the action of acme/c", a.Use, err)
	}
	_, err = cfg.FindAction("diff")
	checkError(t, err, `action "diff" is offered by several plugs: name one of a.diff, b.diff`)
	_, err = cfg.FindAction("lg")
	checkError(t, err, `unknown action "lg" (did you mean log?); the actions are: a.diff, b.diff, log`)
}
