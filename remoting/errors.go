package remoting

import "errors"

// Sentinel errors. Callers test with errors.Is.
var (
	// ErrConnClosed reports a call on, or pending on, a closed connection.
	ErrConnClosed = errors.New("remoting: connection closed")
	// ErrTimeout reports a request whose response did not arrive in time.
	ErrTimeout = errors.New("remoting: request timed out")
	// ErrNotReading reports a request to a peer that is not reading its
	// connection: InvokeNoWait found MaxWriteQueue bytes waiting for the
	// socket, or its request was still waiting when it timed out.
	ErrNotReading = errors.New("remoting: peer not reading")
	// ErrClosed reports use of a closed Server or Client.
	ErrClosed = errors.New("remoting: closed")
	// ErrIdle reports a connection closed after IdleTimeout without a
	// complete frame.
	ErrIdle = errors.New("remoting: idle timeout")
	// ErrBadOptions reports invalid Options or ClientOptions.
	ErrBadOptions = errors.New("remoting: invalid options")
)

// errPanic is the error a panicking processor is answered with.
var errPanic = errors.New("remoting: internal error")
