package main

import (
	"errors"
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

// sessionID reads --session (type:"session-id"): an empty id is refused,
// not taken for "a new session".
var sessionID = kong.NamedMapper("session-id", kong.MapperFunc(func(ctx *kong.DecodeContext, target reflect.Value) error {
	var id string
	if err := ctx.Scan.PopValueInto("id", &id); err != nil {
		return err
	}
	if id == "" {
		return errors.New("an empty session id: give the id of a paused session (see blaise-agent sessions), or leave --session out to start a new session")
	}
	target.SetString(id)
	return nil
}))
