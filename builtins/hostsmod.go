package builtins

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/blaiseagent/blaise-agent/hosts"
	"github.com/blaiseagent/blaise-agent/hosts/hostd"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// hostsModule is the predeclared hosts module: building blocks for hosts
// that plugs hand to next(host = …) (H2).
var hostsModule = &starlarkstruct.Module{
	Name: "hosts",
	Members: starlark.StringDict{
		"command": starlark.NewBuiltin("hosts.command", hostsCommand),
		"ssh":     starlark.NewBuiltin("hosts.ssh", hostsSSH),
	},
}

// hostdCommand is how hosts.ssh starts hostd on the far side by default.
var hostdCommand = []string{"blaise-agent", "hostd"}

// hostsCommand implements hosts.command(argv, via = None, env = None,
// ship = False, workspace = None): a host reached by running argv on via
// (default: the runner's machine) that speaks the hostd protocol on its
// stdio. workspace is the shipped hostd's; without ship, argv says it.
func hostsCommand(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	const fn = "hosts.command"
	var argvV, viaV, envV, workspaceV starlark.Value = nil, starlark.None, starlark.None, starlark.None
	var ship bool
	if err := starlark.UnpackArgs(fn, args, kwargs, "argv", &argvV, "via?", &viaV, "env?", &envV, "ship?", &ship, "workspace?", &workspaceV); err != nil {
		return nil, err
	}
	argv, err := argStrings(fn, "argv", argvV)
	if err != nil {
		return nil, err
	}
	env, err := argEnv(fn, envV)
	if err != nil {
		return nil, err
	}
	workspace, err := argWorkspace(fn, workspaceV)
	if err != nil {
		return nil, err
	}
	if workspace != "" && !ship {
		return nil, fmt.Errorf("%s: workspace: only with ship = True; otherwise argv starts hostd, so give it --workspace there", fn)
	}
	return newCommandHost(thread, fn, hostd.CommandOptions{Argv: argv, Env: env, Kind: "command", Workspace: workspace}, viaV, ship)
}

// argWorkspace converts the workspace argument of the hosts functions: a
// directory on the far side, which goes on hostd's command line.
func argWorkspace(fn string, v starlark.Value) (string, error) {
	dir, err := argOptString(fn, "workspace", v)
	if err != nil {
		return "", err
	}
	if v != starlark.None && dir == "" {
		return "", fmt.Errorf("%s: workspace: must not be empty", fn)
	}
	if strings.ContainsAny(dir, "\n\r\x00") {
		return "", fmt.Errorf("%s: workspace: must not contain a line break or a NUL byte", fn)
	}
	return dir, nil
}

// hostsSSH implements hosts.ssh(address, user = None, key = None,
// port = None, known_hosts = None, options = [], command = ["blaise-agent",
// "hostd"], ship = False, via = None, env = None, workspace = None), built
// on the system's ssh client. With ship, the far side runs sh and the
// shipped hostd, so command is refused; so is workspace with a command,
// which says the workspace itself.
func hostsSSH(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	const fn = "hosts.ssh"
	var address string
	var userV, keyV, portV, knownV, cmdV, viaV, envV, workspaceV starlark.Value = starlark.None, starlark.None, starlark.None, starlark.None, starlark.None, starlark.None, starlark.None, starlark.None
	var optsV starlark.Value = starlark.NewList(nil)
	var ship bool
	if err := starlark.UnpackArgs(fn, args, kwargs, "address", &address, "user?", &userV, "key?", &keyV, "port?", &portV,
		"known_hosts?", &knownV, "options?", &optsV, "command?", &cmdV, "ship?", &ship, "via?", &viaV, "env?", &envV,
		"workspace?", &workspaceV); err != nil {
		return nil, err
	}
	workspace, err := argWorkspace(fn, workspaceV)
	if err != nil {
		return nil, err
	}
	if address == "" {
		return nil, fmt.Errorf("%s: address: must not be empty", fn)
	}
	argv := []string{"ssh", "-T", "-o", "BatchMode=yes"}
	known, err := argOptString(fn, "known_hosts", knownV)
	if err != nil {
		return nil, err
	}
	if known != "" {
		argv = append(argv, "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile="+known)
	}
	key, err := argOptString(fn, "key", keyV)
	if err != nil {
		return nil, err
	}
	if key != "" {
		argv = append(argv, "-i", key, "-o", "IdentitiesOnly=yes")
	}
	switch p := portV.(type) {
	case starlark.NoneType:
	case starlark.Int:
		n, ok := p.Int64()
		if !ok || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%s: port: want 1 to 65535, got %s", fn, p)
		}
		argv = append(argv, "-p", strconv.FormatInt(n, 10))
	default:
		return nil, fmt.Errorf("%s: port: want int or None, got %s", fn, portV.Type())
	}
	user, err := argOptString(fn, "user", userV)
	if err != nil {
		return nil, err
	}
	if user != "" {
		argv = append(argv, "-l", user)
	}
	if l, ok := optsV.(starlark.Sequence); !ok || l.Len() > 0 {
		opts, err := argStrings(fn, "options", optsV)
		if err != nil {
			return nil, err
		}
		argv = append(argv, opts...)
	}
	remote := hostdCommand
	if cmdV != starlark.None {
		if ship {
			return nil, fmt.Errorf("%s: command: not with ship = True, which runs sh on the far side and starts the shipped hostd itself", fn)
		}
		if workspace != "" {
			return nil, fmt.Errorf("%s: workspace: not with command, which starts hostd: give it --workspace there", fn)
		}
		if remote, err = argStrings(fn, "command", cmdV); err != nil {
			return nil, err
		}
	} else if workspace != "" && !ship {
		remote = append(slices.Clip(remote), "--workspace", workspace)
	}
	// ssh hands the far side's shell one command line.
	argv = append(argv, "--", address)
	if ship {
		argv = append(argv, "sh")
	} else {
		argv = append(argv, shellJoin(remote))
	}
	env, err := argEnv(fn, envV)
	if err != nil {
		return nil, err
	}
	name := "ssh " + address
	if user != "" {
		name = "ssh " + user + "@" + address
	}
	return newCommandHost(thread, fn, hostd.CommandOptions{Argv: argv, Env: env, Kind: "ssh", Name: name, Workspace: workspace}, viaV, ship)
}

// newCommandHost finishes a command host: it runs on via (None: the
// runner's machine), and with ship sends this executable.
func newCommandHost(thread *starlark.Thread, fn string, opts hostd.CommandOptions, viaV starlark.Value, ship bool) (starlark.Value, error) {
	if viaV == starlark.None {
		opts.Via = runnerOf(thread)
		if opts.Via == nil {
			return nil, fmt.Errorf("%s: via: no runner host here; pass via = ctx.runner", fn)
		}
	} else {
		via, ok := HostOf(viaV)
		if !ok {
			return nil, fmt.Errorf("%s: via: want a host, got %s", fn, viaV.Type())
		}
		opts.Via = via
	}
	if ship {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("%s: ship: %w", fn, err)
		}
		opts.Ship = exe
	}
	c := hostd.NewCommand(opts)
	v := NewHost(c, c.Name()).(*Host)
	v.lock = lockOf(thread)
	return v, nil
}

// runnerOf returns the runner's host bound to thread, or nil.
func runnerOf(thread *starlark.Thread) hosts.Host {
	if c, ok := thread.Local(callKey).(*call); ok {
		return c.runner
	}
	return nil
}

// lockOf returns the session lock bound to thread, or nil.
func lockOf(thread *starlark.Thread) *Lock {
	if c, ok := thread.Local(callKey).(*call); ok {
		return c.lock
	}
	return nil
}
