package mqtt

import "errors"

// Sentinel errors of the mqtt package. Callers test with errors.Is.
var (
	// ErrClosed is returned by operations on a server (or backend) after
	// Close.
	ErrClosed = errors.New("mqtt: closed")

	// ErrInvalidOptions wraps every Options.Validate failure.
	ErrInvalidOptions = errors.New("mqtt: invalid options")

	// ErrNoSession is returned by Server.SendTo when no session exists for
	// the client identifier.
	ErrNoSession = errors.New("mqtt: no such session")

	// ErrNotConnected is returned by Server.SendToConnected and
	// Server.Disconnect when the client's session has no connection.
	ErrNotConnected = errors.New("mqtt: client not connected")

	// ErrQueueFull means a session's bounded offline/pending queue has no
	// room for another QoS 1/2 message; the message is dropped for that
	// session (MQTT 5 reason 0x97 quota exceeded where one is reported).
	ErrQueueFull = errors.New("mqtt: session queue full")

	// ErrQuotaExceeded is returned (wrapped) by a Backend or Handler to
	// make the server answer a PUBLISH with 0x97 quota exceeded: a limit
	// of the server's refused the message, such as a full disk. A 3.1.1
	// publisher, which has no reason code, is disconnected as for any
	// failed publish.
	ErrQuotaExceeded = errors.New("mqtt: quota exceeded")

	// ErrCredentials means a credentials file could not be parsed.
	ErrCredentials = errors.New("mqtt: bad credentials file")

	// ErrACL means an ACL file could not be parsed.
	ErrACL = errors.New("mqtt: bad ACL file")

	// ErrNotAuthorized is returned by a Handler or Backend to make the
	// server answer a PUBLISH with 0x87 not authorized.
	ErrNotAuthorized = errors.New("mqtt: not authorized")

	// ErrUnstorable is returned (wrapped) by a Backend's Publish for a
	// message no retry can store (its bytes cannot travel to the store).
	// Its MQTT 5 publisher gets PUBACK/PUBREC 0x83 "implementation
	// specific error" with the reason. A will refused so is dropped
	// (logged), not kept to try again.
	ErrUnstorable = errors.New("mqtt: message cannot be stored")
)
