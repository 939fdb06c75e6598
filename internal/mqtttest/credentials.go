package mqtttest

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// CredentialsIterations is the PBKDF2 iteration count of the lines
// CredentialsFile writes. A line names its own count (the format is in
// mqtt/doc.go); mqtt.HashPassword writes 100,000, which makes each login
// and each line written cost ~0.1 s of CPU under -race. The tests that
// log in only need a line the server checks, not a slow one; the ones
// about the hash itself use mqtt.HashPassword.
const CredentialsIterations = 1000

// CredentialsFile writes a credentials file (mqtt/doc.go's format) with
// one line per user and password of userPasswords (pairs) under the
// test's temp dir and returns its path.
func CredentialsFile(t testing.TB, userPasswords ...string) string {
	t.Helper()
	if len(userPasswords)%2 != 0 {
		t.Fatalf("mqtttest.CredentialsFile: %d strings, want user and password pairs", len(userPasswords))
	}
	enc := base64.RawStdEncoding
	var b strings.Builder
	for i := 0; i < len(userPasswords); i += 2 {
		user, password := userPasswords[i], userPasswords[i+1]
		salt := sha256.Sum256([]byte("mqtttest salt of " + user))
		key, err := pbkdf2.Key(sha256.New, password, salt[:16], CredentialsIterations, 32)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(user + ":pbkdf2-sha256:" + strconv.Itoa(CredentialsIterations) + ":" +
			enc.EncodeToString(salt[:16]) + ":" + enc.EncodeToString(key) + "\n")
	}
	path := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
