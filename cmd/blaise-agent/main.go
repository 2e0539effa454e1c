// Command blaise-agent runs coding agents that speak the Agent Client
// Protocol inside a chain of Starlark plugs.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/blaiseagent/blaise-agent/internal/acp/client"
	"github.com/charmbracelet/log"
	"github.com/muesli/termenv"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle/engine"
	"github.com/blaiseagent/blaise-agent/internal/support/buildinfo"
	"github.com/blaiseagent/blaise-agent/internal/support/resident"
	"github.com/blaiseagent/blaise-agent/interp"
)

// CLI is the command line.
type CLI struct {
	Globals

	Run        RunCmd        `cmd:"" help:"Run a session in the terminal: send a prompt (or type them), stream the answer, pause the session when done."`
	Acp        AcpCmd        `cmd:"" help:"Serve the chain as an ACP agent on stdio, for editors (Zed …) and other ACP clients."`
	Sessions   SessionsCmd   `cmd:"" help:"List, end and resolve sessions."`
	Check      CheckCmd      `cmd:"" help:"Resolve and validate a configuration and its plugs without running anything; print the chain."`
	Doc        DocCmd        `cmd:"" help:"Show the reference of plugs: inputs and persisted state with types, defaults and docs; handlers; whether they resume."`
	Init       InitCmd       `cmd:"" help:"Start a project: a blaise.star, a plug, and a test of it that passes."`
	Lsp        LspCmd        `cmd:"" help:"Serve the Language Server Protocol on stdio for .star files: completion, hover, diagnostics, go to definition."`
	Fmt        FmtCmd        `cmd:"" help:"Format .star files (plugs, configurations, modules) in the one accepted style."`
	Plugs      PlugsCmd      `cmd:"" help:"Pin the plugs of git repositories that a configuration uses, in blaise.lock beside it."`
	Test       TestCmd       `cmd:"" help:"Run golden-file tests of plugs (*.blaisetest): a scripted client and agent through the real chain."`
	Serve      ServeCmd      `cmd:"" help:"Serve Blaise: the control plane of named agents, their runners and their clients."`
	Listen     ListenCmd     `cmd:"" help:"Take the runs of an agent of a Blaise server, on this machine."`
	Agents     AgentsCmd     `cmd:"" help:"List, create, change and delete the agents of a Blaise server."`
	Tokens     TokensCmd     `cmd:"" help:"Mint and revoke a Blaise server's runner registrations and API tokens (its admin, on its machine)."`
	DemoAgent  DemoAgentCmd  `cmd:"" name:"demo-agent" help:"Serve the built-in deterministic ACP agent on stdio (for demos and tests)."`
	Hostd      HostdCmd      `cmd:"" help:"Serve this machine to a runner over the hostd protocol on stdin and stdout (run through ssh, docker exec -i …)."`
	Completion CompletionCmd `cmd:"" help:"Print the shell completion script for bash, zsh or fish: commands, flags, session ids and blaise: references."`

	SessionProcess SessionProcessCmd `cmd:"" name:"session-process" hidden:"" help:"One run of a session (started by front ends)."`
}

// Globals are the flags every command takes.
type Globals struct {
	LogLevel  string           `help:"Log level: debug, info, warn or error." enum:"debug,info,warn,error" default:"info" env:"BLAISE_LOG_LEVEL"`
	LogFormat string           `help:"Log format: text, json or logfmt (these two with RFC 3339 times)." enum:"text,json,logfmt" default:"text" env:"BLAISE_LOG_FORMAT"`
	Color     string           `help:"Styles in output and logs: auto (on a terminal, unless NO_COLOR is set or TERM=dumb), always or never." enum:",auto,always,never" default:"auto" env:"BLAISE_COLOR"`
	Version   kong.VersionFlag `help:"Print the module version and VCS revision of this build, and exit."`
}

// logTimeFormat is RFC 3339 with milliseconds, which log tools parse.
const logTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// Logger returns the logger the flags describe, writing to stderr.
func (g *Globals) Logger() *log.Logger {
	// A writer that is not the terminal itself: the logger would ask the
	// terminal for its colours and wait for an answer.
	return g.LoggerTo(struct{ io.Writer }{os.Stderr})
}

// LoggerTo is Logger writing to w, which ends on stderr. Styles are ours
// to choose, for stderr.
func (g *Globals) LoggerTo(w io.Writer) *log.Logger {
	l := log.NewWithOptions(w, log.Options{ReportTimestamp: g.LogFormat != "text", TimeFormat: logTimeFormat})
	l.SetColorProfile(termenv.Ascii)
	if g.color().Styled(os.Stderr) {
		l.SetColorProfile(termenv.ANSI256)
	}
	level, err := log.ParseLevel(g.LogLevel)
	if err == nil {
		l.SetLevel(level)
	}
	switch g.LogFormat {
	case "json":
		l.SetFormatter(log.JSONFormatter)
	case "logfmt":
		l.SetFormatter(log.LogfmtFormatter)
	}
	return l
}

// color returns the --color mode.
func (g *Globals) color() client.ColorMode { return client.ColorMode(g.Color) }

// childColor is the --color of session processes, whose logs reach the
// terminal through run: what run's own log would do.
func (g *Globals) childColor() string {
	if g.color().Styled(os.Stderr) {
		return string(client.ColorAlways)
	}
	return string(client.ColorNever)
}

// usageExit is the status kong exits with after a usage error.
const usageExit = 80

// options make the command line of CLI; tests add their own writers and
// exit.
func options() []kong.Option {
	return []kong.Option{
		kong.Name("blaise-agent"),
		kong.Description("Run ACP coding agents inside a chain of Starlark plugs."),
		settingDuration,
		sessionID,
		kong.Vars{"version": buildinfo.Version()},
	}
}

// startOver is when a process's start is over: a session's processes
// are ready within tens of milliseconds, so a second later they are
// serving, and the pages of their start are behind them. A variable for
// the tests, which release on a signal instead (releaseOnSignal).
var startOver = time.Second

func main() {
	args, parser, globals := os.Args[1:], (*kong.Kong)(nil), (*Globals)(nil)
	if os.Getenv(engine.SpareEnv) != "" {
		args, parser, globals = awaitRun()
	}
	if parser == nil {
		parser, globals = parserFor(args)
	}
	// What a mistaken command line is told goes to stderr: the stdout of
	// acp, demo-agent and hostd is a protocol stream.
	if len(args) == 0 {
		summary(os.Stderr, parser.Model)
		parser.Exit(usageExit)
	}
	ctx, err := parser.Parse(args)
	var perr *kong.ParseError
	if errors.As(err, &perr) && perr.ExitCode() != usageExit {
		// A hook's error, such as no configuration found: the command
		// line was right, so no usage.
		fail(err)
	}
	if err != nil {
		usageError(os.Stderr, perr)
		parser.Exit(usageExit)
	}
	// A process that outlives its start (a session's) gives back what
	// only the start needed, once it is over (docs/performance.md).
	time.AfterFunc(startOver, resident.Release)
	if err := ctx.Run(globals); err != nil {
		fail(err)
	}
}

// parserFor returns the parser of command line args (commandLine), and
// where it puts the Globals.
func parserFor(args []string) (*kong.Kong, *Globals) {
	cli, globals := commandLine(args)
	parser := kong.Must(cli, append(options(),
		kong.Exit(func(code int) {
			if code == usageExit {
				code = 2 // as Unix tools do
			}
			os.Exit(code)
		}),
	)...)
	completeWords(parser)
	return parser, globals
}

// awaitRun is a spare session process's wait for its command line
// (engine.AwaitRun), with the parser of session-process built meanwhile;
// the parser is nil when the command line is another command's.
func awaitRun() ([]string, *kong.Kong, *Globals) {
	parser, globals := parserFor([]string{"session-process"})
	args, err := engine.AwaitRun()
	if errors.Is(err, engine.ErrNoRunHanded) {
		os.Exit(0)
	}
	if err != nil {
		fail(err)
	}
	if len(args) == 0 || args[0] != "session-process" {
		return args, nil, nil
	}
	return args, parser, globals
}

// commandLine returns what to parse args into, and its Globals: a CLI,
// or, when args start with the name of one of its commands (and no shell
// asks for completions), a struct of the Globals and that command alone.
// Kong's model of every command took about 7 ms of each start (a session
// starts three processes), that of one command well under one
// (docs/performance.md); a command's help and errors name only its own
// flags and commands either way.
func commandLine(args []string) (cli any, globals *Globals) {
	full := reflect.TypeFor[CLI]()
	if len(args) > 0 && os.Getenv("COMP_LINE") == "" {
		for i := range full.NumField() {
			if f := full.Field(i); !f.Anonymous && commandName(f) == args[0] {
				v := reflect.New(reflect.StructOf([]reflect.StructField{full.Field(0), f})).Elem()
				return v.Addr().Interface(), v.Field(0).Addr().Interface().(*Globals)
			}
		}
	}
	c := new(CLI)
	return c, &c.Globals
}

// commandName is the name of the command of field f of CLI, as kong names it.
func commandName(f reflect.StructField) string {
	if name := f.Tag.Get("name"); name != "" {
		return name
	}
	return strings.ToLower(f.Name)
}

// fail reports err and exits with its code, else 1.
func fail(err error) {
	// Each mistake of a configuration goes on a line of its own, as
	// compilers and go vet write them.
	var list interp.Errors
	if errors.As(err, &list) {
		for _, e := range list {
			fmt.Fprintln(os.Stderr, "blaise-agent:", e)
		}
	} else {
		fmt.Fprintln(os.Stderr, "blaise-agent:", err)
	}
	var coded interface{ ExitCode() int }
	if errors.As(err, &coded) {
		os.Exit(coded.ExitCode())
	}
	os.Exit(1)
}
