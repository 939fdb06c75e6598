package mqtt

import (
	"bufio"
	"bytes"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// Password hashing parameters of new credential entries.
const (
	pbkdf2Iterations = 100_000
	pbkdf2SaltLen    = 16
	pbkdf2KeyLen     = 32
	pbkdf2Scheme     = "pbkdf2-sha256"
)

// credential is one parsed credentials file entry.
type credential struct {
	iterations int
	salt, hash []byte
}

// Credentials maps user names to salted password hashes (file format in
// doc.go).
type Credentials struct {
	users map[string]credential
}

// HashPassword returns a new credentials file line for user with a random
// salt: "user:pbkdf2-sha256:100000:<salt b64>:<hash b64>".
func HashPassword(user, password string) (string, error) {
	if user == "" || strings.ContainsAny(user, ":\n\r") {
		return "", fmt.Errorf("%w: user name %q may not be empty or hold ':' or newlines", ErrCredentials, user)
	}
	salt := make([]byte, pbkdf2SaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("mqtt: salt: %w", err)
	}
	key, err := pbkdf2.Key(sha256.New, password, salt, pbkdf2Iterations, pbkdf2KeyLen)
	if err != nil {
		return "", fmt.Errorf("mqtt: hash password: %w", err)
	}
	enc := base64.RawStdEncoding
	return fmt.Sprintf("%s:%s:%d:%s:%s", user, pbkdf2Scheme, pbkdf2Iterations, enc.EncodeToString(salt),
		enc.EncodeToString(key)), nil
}

// LoadCredentials reads a credentials file.
func LoadCredentials(path string) (*Credentials, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCredentials, err)
	}
	return ParseCredentials(data)
}

// ParseCredentials parses credentials file content.
func ParseCredentials(data []byte) (*Credentials, error) {
	c := &Credentials{users: map[string]credential{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) != 5 || f[0] == "" || f[1] != pbkdf2Scheme {
			return nil, fmt.Errorf("%w: line %d: want user:%s:iterations:salt:hash", ErrCredentials, n, pbkdf2Scheme)
		}
		it, err := strconv.Atoi(f[2])
		if err != nil || it < 1 || it > 10_000_000 {
			return nil, fmt.Errorf("%w: line %d: bad iteration count %q", ErrCredentials, n, f[2])
		}
		salt, err1 := base64.RawStdEncoding.DecodeString(f[3])
		hash, err2 := base64.RawStdEncoding.DecodeString(f[4])
		if err1 != nil || err2 != nil || len(hash) == 0 {
			return nil, fmt.Errorf("%w: line %d: bad base64 salt or hash", ErrCredentials, n)
		}
		if _, dup := c.users[f[0]]; dup {
			return nil, fmt.Errorf("%w: line %d: user %q listed twice", ErrCredentials, n, f[0])
		}
		c.users[f[0]] = credential{iterations: it, salt: salt, hash: hash}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCredentials, err)
	}
	return c, nil
}

// Check reports whether password is user's password (constant time in
// the hash comparison).
func (c *Credentials) Check(user string, password []byte) bool {
	cr, ok := c.users[user]
	if !ok {
		return false
	}
	key, err := pbkdf2.Key(sha256.New, string(password), cr.salt, cr.iterations, len(cr.hash))
	return err == nil && subtle.ConstantTimeCompare(key, cr.hash) == 1
}

// aclRule is one allow/deny line.
type aclRule struct {
	allow     bool
	publish   bool
	subscribe bool
	filter    string // may hold %c and %u
}

// aclSection is a block of rules for a client id, a user name or everyone.
type aclSection struct {
	kind  string // "client", "user" or "all"
	name  string
	rules []aclRule
}

// ACL holds publish/subscribe rules (file format in doc.go).
type ACL struct {
	sections     []aclSection
	defaultAllow bool
	// denySubscribe is set when some rule denies a subscription: then a
	// subscription granted through a wider filter ("#") may still reach
	// topics a rule denies by name, and every delivery is checked
	// (MayRead).
	denySubscribe bool
}

// LoadACL reads an ACL file.
func LoadACL(path string) (*ACL, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrACL, err)
	}
	return ParseACL(data)
}

// ParseACL parses ACL file content.
func ParseACL(data []byte) (*ACL, error) {
	a := &ACL{}
	cur := -1
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		switch f[0] {
		case "default":
			if len(f) != 2 || (f[1] != "allow" && f[1] != "deny") {
				return nil, fmt.Errorf("%w: line %d: want default allow|deny", ErrACL, n)
			}
			a.defaultAllow = f[1] == "allow"
		case "client", "user":
			if len(f) != 2 {
				return nil, fmt.Errorf("%w: line %d: want %s <name>", ErrACL, n, f[0])
			}
			a.sections = append(a.sections, aclSection{kind: f[0], name: f[1]})
			cur = len(a.sections) - 1
		case "all":
			a.sections = append(a.sections, aclSection{kind: "all"})
			cur = len(a.sections) - 1
		case "allow", "deny":
			if len(f) != 3 {
				return nil, fmt.Errorf("%w: line %d: want %s publish|subscribe|pubsub <filter>", ErrACL, n, f[0])
			}
			r := aclRule{allow: f[0] == "allow", filter: f[2]}
			switch f[1] {
			case "publish":
				r.publish = true
			case "subscribe":
				r.subscribe = true
			case "pubsub":
				r.publish, r.subscribe = true, true
			default:
				return nil, fmt.Errorf("%w: line %d: unknown action %q", ErrACL, n, f[1])
			}
			probe := strings.NewReplacer("%c", "c", "%u", "u").Replace(r.filter)
			if !packets.ValidTopicFilter(probe) {
				return nil, fmt.Errorf("%w: line %d: bad topic filter %q", ErrACL, n, r.filter)
			}
			if cur < 0 {
				a.sections = append(a.sections, aclSection{kind: "all"})
				cur = len(a.sections) - 1
			}
			a.sections[cur].rules = append(a.sections[cur].rules, r)
			if !r.allow && r.subscribe {
				a.denySubscribe = true
			}
		default:
			return nil, fmt.Errorf("%w: line %d: unknown directive %q", ErrACL, n, f[0])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrACL, err)
	}
	return a, nil
}

// Allowed reports whether the client may publish to topic (subscribe false)
// or subscribe to filter (subscribe true). Sections are tried in order
// client, user, all; within them the first rule whose filter matches
// decides; with no match the file's default decides (deny unless "default
// allow"). A subscribe rule matches a filter it covers: "a/#" covers "a/+"
// and "a/b", not the other way round.
func (a *ACL) Allowed(clientID, username, topic string, subscribe bool) bool {
	for _, kind := range [...]string{"client", "user", "all"} {
		for i := range a.sections {
			s := &a.sections[i]
			if s.kind != kind || kind == "client" && s.name != clientID || kind == "user" && (username == "" || s.name != username) {
				continue
			}
			for _, r := range s.rules {
				if subscribe && !r.subscribe || !subscribe && !r.publish {
					continue
				}
				f := r.filter
				if strings.Contains(f, "%") {
					if strings.ContainsAny(clientID, "+#/") || strings.ContainsAny(username, "+#/") {
						continue // a substituted wildcard would widen the rule
					}
					f = strings.NewReplacer("%c", clientID, "%u", username).Replace(f)
				}
				if subscribe && covers(f, topic) || !subscribe && packets.Match(f, topic) {
					return r.allow
				}
			}
		}
	}
	return a.defaultAllow
}

// MayRead reports whether a message on topic may be delivered to the
// client through a subscription the ACL granted. A subscribe rule decides
// for the topic as it would for a subscription to that topic alone, so a
// "#" subscription granted by "allow subscribe #" does not receive
// "secret/x" when an earlier "deny subscribe secret/#" would refuse a
// subscription to it (mosquitto checks read access per message too). With
// no deny-subscribe rule in the file every granted subscription may read
// all it matches, and MayRead answers true without looking.
func (a *ACL) MayRead(clientID, username, topic string) bool {
	if !a.denySubscribe {
		return true
	}
	return a.Allowed(clientID, username, topic, true)
}

// covers reports whether every topic matching filter sub also matches rule.
func covers(rule, sub string) bool {
	if _, inner, ok := packets.ParseShared(sub); ok {
		sub = inner
	}
	if len(sub) > 0 && sub[0] == '$' && len(rule) > 0 && (rule[0] == '+' || rule[0] == '#') {
		return false
	}
	for {
		rl, rrest, rmore := strings.Cut(rule, "/")
		if rl == "#" {
			return true
		}
		sl, srest, smore := strings.Cut(sub, "/")
		switch {
		case sl == "#":
			return false
		case rl == "+":
		case sl == "+" || rl != sl:
			return false
		}
		if !rmore || !smore {
			return !rmore && !smore || !smore && rrest == "#"
		}
		rule, sub = rrest, srest
	}
}
