package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// cmdFlags is a command's flag set together with its help page. Help asked
// for (-h, -help, --help) goes to stdout with exit 0; a mistake (unknown
// flag, bad value, a word left over after the flags) is reported on stderr
// with the help page and exit 2.
type cmdFlags struct {
	*flag.FlagSet
	name        string // "admin topic create"
	synopsis    string // what follows the name in the usage line
	description string
	examples    []string
	hidden      map[string]bool // old flag spellings kept working, not shown
	stdout      io.Writer
	stderr      io.Writer
}

// newCmdFlags returns the flag set of "smartgo <name>".
func newCmdFlags(name, synopsis, description string, stdout, stderr io.Writer) *cmdFlags {
	c := &cmdFlags{name: name, synopsis: synopsis, description: strings.TrimSpace(description),
		hidden: map[string]bool{}, stdout: stdout, stderr: stderr}
	c.FlagSet = flag.NewFlagSet("smartgo "+name, flag.ContinueOnError)
	c.SetOutput(stderr)
	c.Usage = func() {} // parse prints the page where it belongs
	return c
}

// example adds one example command line (shown under "Examples:").
func (c *cmdFlags) example(lines ...string) { c.examples = append(c.examples, lines...) }

// hide keeps a flag working without listing it (an old spelling).
func (c *cmdFlags) hide(name string) { c.hidden[name] = true }

// printUsage writes the help page to w.
func (c *cmdFlags) printUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: smartgo %s %s\n", c.name, c.synopsis)
	if c.description != "" {
		fmt.Fprintf(w, "\n%s\n", c.description)
	}
	if len(c.examples) > 0 {
		fmt.Fprintln(w, "\nExamples:")
		for _, e := range c.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	var any bool
	c.VisitAll(func(f *flag.Flag) {
		if c.hidden[f.Name] {
			return
		}
		if !any {
			fmt.Fprintln(w, "\nFlags:")
			any = true
		}
		printFlag(w, f)
	})
}

// printFlag writes one flag as flag.PrintDefaults does.
func printFlag(w io.Writer, f *flag.Flag) {
	name, usage := flag.UnquoteUsage(f)
	line := "  -" + f.Name
	if name != "" {
		line += " " + name
	}
	if len(line) <= 4 { // a one-letter boolean: the usage fits on the line
		line += "\t"
	} else {
		line += "\n    \t"
	}
	line += strings.ReplaceAll(usage, "\n", "\n    \t")
	// A usage that says the default in words ("(default: every queue)")
	// is not followed by the raw value standing for it (-1).
	if def := f.DefValue; def != "" && def != "false" && def != "0" && def != "[]" && def != "0s" && !strings.Contains(usage, "(default") {
		if isStringFlag(f) {
			line += fmt.Sprintf(" (default %q)", def)
		} else {
			line += fmt.Sprintf(" (default %v)", def)
		}
	}
	fmt.Fprintln(w, line)
}

// isStringFlag reports whether f holds a plain string (its default is
// quoted in the help).
func isStringFlag(f *flag.Flag) bool {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	_, s := g.Get().(string)
	return s
}

// parse parses args, all of which must be flags. It returns ok = false with
// the exit code when the command must stop: 0 after printing help on
// stdout, 2 after reporting a mistake on stderr.
func (c *cmdFlags) parse(args []string) (code int, ok bool) {
	if code, ok := c.parseSome(args); !ok {
		return code, false
	}
	if c.NArg() > 0 {
		return c.misuse("unexpected argument %q (flags go after the command; this command takes no further words)", c.Arg(0)), false
	}
	return 0, true
}

// parseSome parses flags up to the first word that is not one and leaves
// the rest in Args.
func (c *cmdFlags) parseSome(args []string) (code int, ok bool) {
	if err := c.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.printUsage(c.stdout)
			return exitOK, false
		}
		// The flag package already printed the error to stderr.
		fmt.Fprintln(c.stderr)
		c.printUsage(c.stderr)
		return exitUsage, false
	}
	return 0, true
}

// misuse reports a usage mistake with the help page on stderr and returns
// exit code 2.
func (c *cmdFlags) misuse(format string, args ...any) int {
	fmt.Fprintf(c.stderr, "smartgo %s: %s\n\n", c.name, fmt.Sprintf(format, args...))
	c.printUsage(c.stderr)
	return exitUsage
}

// isHelp reports whether s asks for help.
func isHelp(s string) bool {
	switch s {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// outputFlag registers -o, the one flag name for the output format of
// every command that prints results.
func outputFlag(c *cmdFlags, def string) *string {
	return c.String("o", def, "output `format`: "+map[string]string{"table": "table or json", "text": "text or json"}[def])
}
