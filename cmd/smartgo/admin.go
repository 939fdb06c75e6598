package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/smartgo/smartgo/client/admin"
)

func init() {
	register(command{name: "admin", summary: "topics, clusters, consumer progress, message lookup, offsets, stats, devices and twins", run: runAdmin})
}

// adminCommand is one `smartgo admin` sub-command ("topic create"). Each
// registers itself with registerAdmin from an init function, so a new one
// is a local addition.
type adminCommand struct {
	name        string // one or two words: "cluster", "topic create"
	synopsis    string // its own flags, for the usage line
	summary     string // one line for `smartgo admin -h`
	description string
	examples    []string
	// setup registers the command's own flags and returns the function
	// that runs it once they are parsed. A usageError from it exits 2
	// with the help page; any other error exits 1.
	setup func(fs *cmdFlags) func(ctx context.Context, e *adminEnv) error
}

// adminEnv is what a running admin command works with.
type adminEnv struct {
	a          *admin.Admin
	out        *output
	registries []string
	stderr     io.Writer // warnings
	onClose    []func()  // run when the command ends (clients it opened)
}

// usageError is a mistake in a command's flags found after parsing (a
// missing or out-of-range value): exit 2 with the help page.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// required reports a missing flag as a usage error.
func required(v, flagName string) error {
	if strings.TrimSpace(v) == "" {
		return usagef("%s is required", flagName)
	}
	return nil
}

// oneOf is a usage error unless v is one of the allowed values of flagName.
func oneOf(flagName, v string, allowed ...string) error {
	if slices.Contains(allowed, v) {
		return nil
	}
	return usagef("%s must be %s, not %q", flagName, strings.Join(allowed, ", "), v)
}

// adminTable holds the admin sub-commands by name; written only by init
// functions.
var adminTable = map[string]adminCommand{}

func registerAdmin(c adminCommand) {
	if _, dup := adminTable[c.name]; dup {
		panic("smartgo: admin command registered twice: " + c.name)
	}
	adminTable[c.name] = c
}

// adminGlobals are the flags every admin command takes, before or after
// the command words.
type adminGlobals struct {
	registry string
	format   string
	timeout  time.Duration
}

func (g *adminGlobals) register(fs *cmdFlags) {
	fs.StringVar(&g.registry, "registry", g.registry, "registry `address` (comma-separated for several)")
	fs.StringVar(&g.registry, "n", g.registry, "the same as -registry (mqadmin's name server `address`; ';' or ',' between several)")
	fs.StringVar(&g.format, "o", g.format, "output `format`: table or json")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "overall `timeout`")
}

const adminSynopsis = "[-registry ADDR] [-o table|json] [-timeout D]"

func runAdmin(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := adminGlobals{registry: "127.0.0.1:9876", format: "table", timeout: 10 * time.Second}
	top := newCmdFlags("admin", "<command> [flags] "+adminSynopsis, `
Administers a SmartGo cluster through its registries and brokers: topics,
clusters, consumer group progress, message lookup by id and key, offsets,
broker runtime statistics, device identities and twins. The flags below
work before or after the command words.`+adminCommandList(""), stdout, stderr)
	top.example("smartgo admin cluster", "smartgo admin topic create -t Orders -r 4 -w 4",
		"smartgo admin group progress -g billing -o json", "smartgo admin topic create -h")
	g.register(top)
	if code, ok := top.parseSome(args); !ok {
		return code
	}
	rest := top.Args()
	if len(rest) == 0 {
		return top.misuse("missing command")
	}
	if rest[0] == "help" { // smartgo admin help [command words]
		if len(rest) == 1 {
			top.printUsage(stdout)
			return exitOK
		}
		return runAdmin(ctx, append(rest[1:len(rest):len(rest)], "-h"), stdout, stderr)
	}
	name, n := matchAdmin(rest)
	if n == 0 {
		// A group word alone ("topic") or with -h lists its commands.
		group := rest[0]
		if adminCommandList(group) != "" && (len(rest) == 1 || strings.HasPrefix(rest[1], "-")) {
			w, code := stdout, exitOK
			if !isHelp(rest[len(rest)-1]) || len(rest) == 1 {
				fmt.Fprintf(stderr, "smartgo admin %s: which one?\n", group)
				w, code = stderr, exitUsage
			}
			fmt.Fprintf(w, "Usage: smartgo admin %s <command> [flags]%s\n", group, adminCommandList(group))
			return code
		}
		return top.misuse("unknown command %q%s", commandWords(rest), mqadminHint(rest[0]))
	}
	c := adminTable[name]
	fs := newCmdFlags("admin "+name, strings.TrimSpace(c.synopsis+" "+adminSynopsis), c.description, stdout, stderr)
	fs.examples = c.examples
	exec := c.setup(fs)
	g.register(fs)
	if code, ok := fs.parse(rest[n:]); !ok {
		return code
	}
	if g.format != "table" && g.format != "json" {
		return fs.misuse("-o must be table or json, not %q", g.format)
	}
	if g.timeout <= 0 {
		return fs.misuse("-timeout must be positive, not %v", g.timeout)
	}
	a, err := admin.New(admin.Options{Registries: admin.ParseRegistries(g.registry), NamePeers: true})
	if err != nil {
		return fs.misuse("-registry: %v", err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	out := &output{w: stdout, json: g.format == "json"}
	env := &adminEnv{a: a, out: out, registries: admin.ParseRegistries(g.registry), stderr: stderr}
	err = exec(ctx, env)
	for _, fn := range env.onClose {
		fn()
	}
	if err == nil {
		err = out.err
	}
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return fs.misuse("%s", ue.msg)
	default:
		fmt.Fprintf(stderr, "smartgo admin %s: %v\n", name, err)
		return exitFailure
	}
}

// clusterFlag registers -cluster, and -c as mqadmin names it, for the
// commands that act on every master of one cluster.
func clusterFlag(fs *cmdFlags) *string {
	cluster := fs.String("cluster", "", "`cluster` name (empty: every cluster)")
	fs.StringVar(cluster, "c", "", "the same as -cluster (mqadmin's name)")
	return cluster
}

// commandWords is the one or two words of args an unknown command was
// named with (flags after it are not part of its name).
func commandWords(args []string) string {
	if len(args) >= 2 && !strings.HasPrefix(args[1], "-") && adminCommandList(args[0]) != "" {
		return args[0] + " " + args[1]
	}
	return args[0]
}

// mqadminCommands maps the names of Apache RocketMQ mqadmin's commands a
// RocketMQ user types out of habit to what does the same in smartgo
// admin ("" when nothing here does; mqadmin itself works against
// SmartGo, docs/mqadmin.md).
var mqadminCommands = map[string]string{
	"updateTopic": "topic create", "deleteTopic": "topic delete", "topicList": "topic list",
	"topicRoute": "topic route", "topicStatus": "topic stats", "clusterList": "cluster",
	"brokerStatus": "broker stats", "consumerProgress": "group progress", "updateSubGroup": "group create",
	"deleteSubGroup": "group delete", "getConsumerConfig": "group list", "resetOffsetByTime": "offset reset",
	"queryMsgById": "msg by-id", "queryMsgByKey": "msg by-key", "queryMsgByUniqueKey": "msg by-key -uniq",
	"updateTopicPerm": "topic update -perm", "topicClusterList": "topic route", "consumerConnection": "",
	"getBrokerConfig": "broker config", "updateBrokerConfig": "broker config -set", "queryMsgByOffset": "msg browse", "printMsgByQueue": "msg browse", "printMsg": "msg browse", "sendMessage": "",
	"statsAll": "", "producerConnection": "", "getNamesrvConfig": "", "updateNamesrvConfig": "",
}

// mqadminHint says what to type instead of an mqadmin command name.
func mqadminHint(word string) string {
	equiv, ok := mqadminCommands[word]
	switch {
	case !ok:
		return ""
	case equiv == "":
		return fmt.Sprintf(" (an mqadmin command: smartgo admin has no %s; Apache RocketMQ's mqadmin works against SmartGo, see docs/mqadmin.md)", word)
	default:
		return fmt.Sprintf(" (mqadmin's %s is 'smartgo admin %s'; mqadmin itself works against SmartGo too, see docs/mqadmin.md)", word, equiv)
	}
}

// matchAdmin finds the sub-command named by the first one or two words of
// args and how many words it took (0: none).
func matchAdmin(args []string) (string, int) {
	if len(args) >= 2 {
		if _, ok := adminTable[args[0]+" "+args[1]]; ok {
			return args[0] + " " + args[1], 2
		}
	}
	if _, ok := adminTable[args[0]]; ok {
		return args[0], 1
	}
	return "", 0
}

// adminCommandList lists the sub-commands (of one group word, or all).
func adminCommandList(group string) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(adminTable)) {
		if group != "" && !strings.HasPrefix(name, group+" ") {
			continue
		}
		c := adminTable[name]
		fmt.Fprintf(&b, "\n  %-16s %s", name, c.summary)
	}
	if b.Len() == 0 {
		return ""
	}
	return "\n\nCommands ('smartgo admin <command> -h' for each one's flags and examples):" + b.String()
}
