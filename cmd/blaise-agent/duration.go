package main

import (
	"reflect"

	"github.com/alecthomas/kong"

	"github.com/blaiseagent/blaise-agent/interp"
)

// settingDuration reads the flags of the session settings (type:"setting")
// as session(...) reads its arguments: "--timeout 0s" is refused there and
// here alike, not taken for the default.
var settingDuration = kong.NamedMapper("setting", kong.MapperFunc(func(ctx *kong.DecodeContext, target reflect.Value) error {
	var text string
	if err := ctx.Scan.PopValueInto("duration", &text); err != nil {
		return err
	}
	d, err := interp.ParseSettingDuration(text)
	if err != nil {
		return err
	}
	target.SetInt(int64(d))
	return nil
}))
