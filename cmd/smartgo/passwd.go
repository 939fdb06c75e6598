package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/smartgo/smartgo/internal/fsutil"
	"github.com/smartgo/smartgo/mqtt"
)

func init() {
	register(command{name: "passwd", summary: "add, change or delete a user in an MQTT credentials file", run: runPasswd})
}

// stdin is the password source of passwd (a variable for in-process tests).
var stdin io.Reader = os.Stdin

func runPasswd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("passwd", "-f FILE -u USER [-p PASSWORD | -delete]", `
Writes a user's line in the MQTT credentials file the bridge reads
(bridge.credentials_file): "user:pbkdf2-sha256:ITERATIONS:SALT:HASH", the
password hashed with PBKDF2-HMAC-SHA256 over a random 16-byte salt (salt
and hash in unpadded base64). The file is created (mode 0600) if missing;
the user's line is replaced if present; other lines and comments stay.

The password is asked for twice on a terminal (not echoed); otherwise the
first line of standard input is the password; -p gives it on the command
line (visible to other users in the process list: scripts only). A bridge
reads the file at start: restart it to apply a change.`, stdout, stderr)
	fs.example("smartgo passwd -f data/mqtt.passwd -u sensor-17",
		"printf '%s\\n' \"$PASS\" | smartgo passwd -f data/mqtt.passwd -u sensor-17",
		"smartgo passwd -f data/mqtt.passwd -u sensor-17 -delete")
	file := fs.String("f", "", "credentials `file`")
	user := fs.String("u", "", "user `name`")
	password := fs.String("p", "", "the `password` (default: prompt, or the first line of standard input)")
	del := fs.Bool("delete", false, "remove the user instead")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if *file == "" || *user == "" {
		return fs.misuse("-f and -u are required")
	}
	if *del && *password != "" {
		return fs.misuse("-delete takes no password")
	}
	old, err := os.ReadFile(*file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stderr, "smartgo passwd: %v\n", err)
		return exitFailure
	}
	if _, err := mqtt.ParseCredentials(old); err != nil {
		fmt.Fprintf(stderr, "smartgo passwd: %s: %v (fix or move the file first)\n", *file, err)
		return exitFailure
	}
	var line string
	if !*del {
		pw := *password
		if pw == "" {
			if pw, err = readPassword(stdin, stderr); err != nil {
				fmt.Fprintf(stderr, "smartgo passwd: %v\n", err)
				return exitFailure
			}
		}
		if pw == "" {
			fmt.Fprintln(stderr, "smartgo passwd: empty password")
			return exitUsage
		}
		if line, err = mqtt.HashPassword(*user, pw); err != nil {
			return fs.misuse("%v", err)
		}
	}
	out, found := replaceUser(old, *user, line)
	if *del && !found {
		fmt.Fprintf(stderr, "smartgo passwd: %s: no user %q\n", *file, *user)
		return exitFailure
	}
	if err := fsutil.WriteFileAtomic(*file, out, 0o600); err != nil {
		fmt.Fprintf(stderr, "smartgo passwd: %v\n", err)
		return exitFailure
	}
	switch {
	case *del:
		fmt.Fprintf(stdout, "%s: user %s deleted\n", *file, *user)
	case found:
		fmt.Fprintf(stdout, "%s: password of %s changed\n", *file, *user)
	default:
		fmt.Fprintf(stdout, "%s: user %s added\n", *file, *user)
	}
	return exitOK
}

// replaceUser returns the file content with user's line replaced by line
// (removed when line is empty; appended when user has none) and whether
// the user had a line.
func replaceUser(data []byte, user, line string) ([]byte, bool) {
	var b bytes.Buffer
	found := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		l := sc.Text()
		if name, _, ok := strings.Cut(strings.TrimSpace(l), ":"); ok && name == user && !strings.HasPrefix(strings.TrimSpace(l), "#") {
			found = true
			if line != "" {
				b.WriteString(line + "\n")
			}
			continue
		}
		b.WriteString(l + "\n")
	}
	if !found && line != "" {
		b.WriteString(line + "\n")
	}
	return b.Bytes(), found
}

// readPassword asks twice with echo off when in is a terminal, else
// reads the first line of in.
func readPassword(in io.Reader, prompt io.Writer) (string, error) {
	f, isFile := in.(*os.File)
	if !isFile {
		return firstLine(in)
	}
	saved, err := unix.IoctlGetTermios(int(f.Fd()), ioctlGetTermios)
	if err != nil { // not a terminal
		return firstLine(in)
	}
	noEcho := *saved
	noEcho.Lflag &^= unix.ECHO
	if err := unix.IoctlSetTermios(int(f.Fd()), ioctlSetTermios, &noEcho); err != nil {
		return "", fmt.Errorf("terminal: %w", err)
	}
	defer unix.IoctlSetTermios(int(f.Fd()), ioctlSetTermios, saved)
	r := bufio.NewReader(f)
	ask := func(p string) (string, error) {
		fmt.Fprint(prompt, p)
		s, err := r.ReadString('\n')
		fmt.Fprintln(prompt)
		if err != nil && s == "" {
			return "", fmt.Errorf("read password: %w", err)
		}
		return strings.TrimRight(s, "\r\n"), nil
	}
	p1, err := ask("Password: ")
	if err != nil {
		return "", err
	}
	p2, err := ask("Again: ")
	if err != nil {
		return "", err
	}
	if p1 != p2 {
		return "", errors.New("the passwords differ")
	}
	return p1, nil
}

func firstLine(in io.Reader) (string, error) {
	s, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && (err != io.EOF || s == "") {
		if err == io.EOF {
			return "", errors.New("no password on standard input")
		}
		return "", fmt.Errorf("read password: %w", err)
	}
	return strings.TrimRight(s, "\r\n"), nil
}
