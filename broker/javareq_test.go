package broker

import (
	"testing"

	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// javaInvoke sends a request as mqadmin 4.9.8 does (testnet.JavaInvoke).
func javaInvoke(t *testing.T, addr string, code int32, fields map[string]string, body []byte) *protocol.Command {
	t.Helper()
	return testnet.JavaInvoke(t, addr, code, fields, body)
}
