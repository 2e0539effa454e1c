package builtins_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blaiseagent/blaise-agent/builtins"
	"github.com/blaiseagent/blaise-agent/hosts"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// runHosts runs src with the predeclared names of plugs, on a thread bound
// to runner as the runner's machine, and returns its error.
func runHosts(t *testing.T, runner hosts.Host, src string) error {
	t.Helper()
	thread := &starlark.Thread{Name: t.Name()}
	lock := &builtins.Lock{}
	lock.Acquire()
	defer lock.Release()
	builtins.BindThread(thread, lock, context.Background(), runner)
	predeclared := starlark.StringDict{"runner": builtins.NewHost(runner, "runner")}
	for k, v := range builtins.Predeclared {
		predeclared[k] = v
	}
	_, err := starlark.ExecFileOptions(&syntax.FileOptions{}, thread, "t.star", hostStarPrelude+src, predeclared)
	return err
}

func TestH2_HostsModuleRefusesBadInput(t *testing.T) {
	runner := hosts.NewLocal(hosts.LocalOptions{Workspace: t.TempDir()})
	defer runner.Close()
	for src, want := range map[string]string{
		`hosts.command([])`:                                       "hosts.command: argv: must not be empty",
		`hosts.command("ssh x")`:                                  "hosts.command: argv: want list of strings, got string",
		`hosts.command(["a", 1])`:                                 "hosts.command: argv[1]: want string, got int",
		`hosts.command(["a"], via = "local")`:                     "hosts.command: via: want a host, got string",
		`hosts.command(["a"], env = {"A": 1})`:                    `hosts.command: env["A"]: want string, got int`,
		`hosts.command(["a"], ship = "yes")`:                      `hosts.command: for parameter "ship": got string, want bool`,
		`hosts.ssh("")`:                                           "hosts.ssh: address: must not be empty",
		`hosts.ssh("box", port = 0)`:                              "hosts.ssh: port: want 1 to 65535, got 0",
		`hosts.ssh("box", port = "22")`:                           "hosts.ssh: port: want int or None, got string",
		`hosts.ssh("box", options = ["-v", 2])`:                   "hosts.ssh: options[1]: want string, got int",
		`hosts.ssh("box", key = 1)`:                               "hosts.ssh: key: want string or None, got int",
		`hosts.ssh("box", command = [])`:                          "hosts.ssh: command: must not be empty",
		`hosts.ssh("box", known_hosts = ["a"])`:                   "hosts.ssh: known_hosts: want string or None, got list",
		`hosts.ssh("box", command = ["hostd"], ship = True)`:      "hosts.ssh: command: not with ship = True, which runs sh on the far side and starts the shipped hostd itself",
		`hosts.command(["a"], workspace = "/w")`:                  "hosts.command: workspace: only with ship = True; otherwise argv starts hostd, so give it --workspace there",
		`hosts.command(["sh"], ship = True, workspace = 1)`:       "hosts.command: workspace: want string or None, got int",
		`hosts.ssh("box", command = ["hostd"], workspace = "/w")`: "hosts.ssh: workspace: not with command, which starts hostd: give it --workspace there",
		`hosts.ssh("box", workspace = "")`:                        "hosts.ssh: workspace: must not be empty",
		`hosts.ssh("box", workspace = "a\nb")`:                    "hosts.ssh: workspace: must not contain a line break or a NUL byte",
		`hosts.command(["sh", "-c", "exit 3"]).exec(["true"])`:    "exec: host command sh -c 'exit 3': connect: the far side closed the stream before the handshake (the command exited with code 3)",
		`hosts.command(["sh", "-c", "exit 4"]).info`:              "host.info: host command sh -c 'exit 4': connect: the far side closed the stream before the handshake (the command exited with code 4)",
	} {
		err := runHosts(t, runner, src)
		if err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant %s", src, err, want)
		}
	}
}

func TestH2_HostsCommandValue(t *testing.T) {
	runner := hosts.NewLocal(hosts.LocalOptions{Workspace: t.TempDir()})
	defer runner.Close()
	err := runHosts(t, runner, `
h = hosts.command(["sh", "-c", "exit 3"])
eq(type(h), "host")
eq(str(h), "<host command sh -c 'exit 3'>")
eq(dir(h), ["exec", "forward", "fs", "info", "spawn"])
eq(dir(hosts), ["command", "ssh"])
`)
	if err != nil {
		t.Fatal(err)
	}
}

// TestH2_HostsSSHCommandLine checks the ssh command line through a fake
// ssh that prints its arguments and fails as ssh does.
func TestH2_HostsSSHCommandLine(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "ssh"), []byte("#!/bin/sh\necho \"$@\" >&2\nexit 255\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	runner := hosts.NewLocal(hosts.LocalOptions{Workspace: t.TempDir(), BaseEnv: map[string]string{"PATH": bin + ":/usr/bin:/bin"}})
	defer runner.Close()
	for src, want := range map[string]string{
		`hosts.ssh("box.example", user = "me", key = "/k", port = 2222, known_hosts = "/kh", options = ["-v"])`: "host ssh me@box.example: connect: the far side closed the stream before the handshake (the command exited with code 255; its stderr ends with: " +
			"-T -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile=/kh -i /k -o IdentitiesOnly=yes -p 2222 -l me -v -- box.example blaise-agent hostd)",
		`hosts.ssh("box", command = ["/opt/blaise agent", "hostd"])`: "its stderr ends with: -T -o BatchMode=yes -- box '/opt/blaise agent' hostd)",
		`hosts.ssh("box", ship = True)`:                              "its stderr ends with: -T -o BatchMode=yes -- box sh)",
		`hosts.ssh("box", workspace = "/srv/my work")`:               "its stderr ends with: -T -o BatchMode=yes -- box blaise-agent hostd --workspace '/srv/my work')",
		`hosts.ssh("box", ship = True, workspace = "/srv/w")`:        "its stderr ends with: -T -o BatchMode=yes -- box sh)",
	} {
		err := runHosts(t, runner, src+`.exec(["true"])`)
		if err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant …%s", src, err, want)
		}
	}
}
