package listen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/blaiseagent/blaise-agent/internal/chain"
	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
	"github.com/blaiseagent/blaise-agent/internal/server/apiclient"
	"github.com/blaiseagent/blaise-agent/internal/support/exitcode"
	"github.com/charmbracelet/log"
)

// Options are listen's flags.
type Options struct {
	Config     string // the blaise.star
	Server     string
	Agent      string
	Name       string // "": the host name
	Version    string // blaise-agent's
	Credential string // the credential file; "": DefaultCredential(Server, Name)
	// RegisterToken, when set and there is no credential yet, registers
	// the runner with it.
	RegisterToken string
	// StoreRelay: see Runner.StoreRelay.
	StoreRelay bool
	// Command starts session processes (default: this executable).
	Command []string
	LogArgs []string
	HTTP    *http.Client
	Stderr  io.Writer
	Log     *log.Logger
}

// DefaultCredential is where a runner keeps its credential:
// $XDG_CONFIG_HOME (or ~/.config)/blaise-agent/runners/NAME.credential.
func DefaultCredential(name string) string {
	base := os.Getenv("XDG_CONFIG_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".config")
	}
	return filepath.Join(base, "blaise-agent", "runners", name+".credential")
}

// Main registers the runner if it must, loads the configuration and takes
// runs until ctx is done.
func Main(ctx context.Context, o Options) error {
	if o.Name == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("the runner's name: %w (give one with --name)", err)
		}
		o.Name = DefaultName(host)
	}
	if o.Credential == "" {
		o.Credential = DefaultCredential(o.Name)
	}
	cfgPath, err := filepath.Abs(o.Config)
	if err != nil {
		return err
	}
	cfg, err := chain.LoadConfig(cfgPath, o.Log)
	if err != nil {
		return err
	}
	if err := checkServerURL(o.Server); err != nil {
		return err
	}
	cred, err := apiclient.ReadCredential(o.Credential)
	registered := false
	if errors.Is(err, fs.ErrNotExist) && o.RegisterToken != "" {
		cred, err = o.register(ctx)
		registered = true
	}
	if err != nil {
		return err
	}
	command := o.Command
	if len(command) == 0 {
		self, err := chain.Self()
		if err != nil {
			return err
		}
		command = []string{self, "session-process"}
	}
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	runner := func(cred string) *Runner {
		return &Runner{
			Server: o.Server, Credential: cred, Agent: o.Agent, Name: o.Name, Version: o.Version,
			Config: cfg, ConfigPath: cfgPath,
			Command: append(append([]string(nil), command...), o.LogArgs...),
			Dir:     dir, Env: sessionEnv(), Stderr: o.Stderr, Log: o.Log, HTTPClient: o.HTTP, StoreRelay: o.StoreRelay,
		}
	}
	err = runner(cred).Run(ctx)
	if errors.Is(err, ErrCredentialRefused) && o.RegisterToken != "" && !registered {
		// A credential revoked, or of another server: the registration
		// token given is what the runner is to be known by now.
		o.Log.Warn("the server refused the runner's credential; registering again with --register-token", "err", err)
		if cred, err = o.register(ctx); err != nil {
			return err
		}
		err = runner(cred).Run(ctx)
	}
	return err
}

// register exchanges the registration token for a credential, kept in
// o.Credential.
func (o *Options) register(ctx context.Context) (string, error) {
	// The server refuses the name too; said here, it names the flag and a
	// name that would do, and the registration token is not spent on a
	// refusal.
	if err := lifecycle.CheckName("runner", o.Name); err != nil {
		return "", fmt.Errorf("--name: %w; for example --name %s", err, DefaultName(o.Name))
	}
	cred, err := apiclient.Register(ctx, o.Server, o.HTTP, o.RegisterToken, o.Name, o.Credential)
	if err == nil {
		o.Log.Info("registered", "runner", o.Name, "credential", o.Credential)
	}
	return cred, err
}

// checkServerURL refuses a --server that no connection can use, which
// listen would otherwise retry for ever.
func checkServerURL(server string) error {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return &exitcode.Error{Code: 2, Err: fmt.Errorf("--server %q: want the server's URL, http:// or https:// and its host, such as http://127.0.0.1:7420", server)}
	}
	return nil
}

// DefaultName is the runner name made of a host name: its first label,
// lowercased, with each character that may not be in a name (a letter,
// a digit or '-') replaced by '-', at most 63 characters; "runner" if
// nothing is left.
func DefaultName(host string) string {
	label, _, _ := strings.Cut(strings.ToLower(host), ".")
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, label)
	if len(name) > 63 {
		name = name[:63]
	}
	if name = strings.TrimLeft(name, "-"); name == "" {
		return "runner"
	}
	return name
}

// sessionEnv is this process's environment without Blaise credentials:
// no token reaches a session process, a plug or an agent (L8).
func sessionEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !chain.IsBlaiseSecret(k) {
			out = append(out, kv)
		}
	}
	return out
}
