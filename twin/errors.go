package twin

import (
	"errors"
	"fmt"
)

// Go-level sentinel errors of the twin package. Every *Error a request
// gets wraps one of the first group, so callers test them with errors.Is
// (client/twin returns them unchanged across the wire).
var (
	// ErrInvalid: the request is malformed or breaks a document rule (bad
	// JSON, a key, string, integer or depth rule, a bad identity field).
	// Status 400.
	ErrInvalid = errors.New("twin: invalid request")

	// ErrNotFound: the device or module does not exist. Status 404.
	ErrNotFound = errors.New("twin: not found")

	// ErrExists: a create-only request found the identity. Status 409.
	ErrExists = errors.New("twin: already exists")

	// ErrPrecondition: an If-Match etag or an expected $version does not
	// match, or a disconnect names a connection that is no longer the
	// current one. Status 412.
	ErrPrecondition = errors.New("twin: precondition failed")

	// ErrTooLarge: the request body, or tags, desired or reported after
	// the change, exceed their size limit. Status 413.
	ErrTooLarge = errors.New("twin: too large")

	// ErrQuota: a device already has the maximum number of modules, or
	// of cloud-to-device messages outstanding.
	// Status 403.
	ErrQuota = errors.New("twin: quota exceeded")

	// ErrCorrupt is wrapped by every error about a log entry or snapshot
	// whose bytes are not well formed. The engine is left unchanged.
	ErrCorrupt = errors.New("twin: corrupt")

	// ErrUnsupportedFormat: a log entry, snapshot or wire body carries a
	// format version this build does not know.
	ErrUnsupportedFormat = errors.New("twin: unsupported format version")

	// ErrBadOptions is wrapped by Options.Validate errors.
	ErrBadOptions = errors.New("twin: invalid options")
)

// Status codes a Reply carries (HTTP's, as IoT Hub uses them).
const (
	StatusOK           = 200
	StatusNoContent    = 204
	StatusBadRequest   = 400
	StatusForbidden    = 403
	StatusNotFound     = 404
	StatusConflict     = 409
	StatusPrecondition = 412
	StatusTooLarge     = 413
)

// Error is a request failure: an HTTP-style status, an IoT Hub-style error
// code (ArgumentInvalid, DeviceNotFound, PreconditionFailed, ...) and a
// message that names the rule that failed. It unwraps to the sentinel of
// its status (ErrInvalid, ErrNotFound, ...).
type Error struct {
	Status int
	Code   string
	Msg    string
}

// Error returns "twin: <code>: <message>".
func (e *Error) Error() string { return "twin: " + e.Code + ": " + e.Msg }

// Unwrap returns the sentinel of the status.
func (e *Error) Unwrap() error { return statusSentinel(e.Status) }

func statusSentinel(status int) error {
	switch status {
	case StatusNotFound:
		return ErrNotFound
	case StatusConflict:
		return ErrExists
	case StatusPrecondition:
		return ErrPrecondition
	case StatusTooLarge:
		return ErrTooLarge
	case StatusForbidden:
		return ErrQuota
	default:
		return ErrInvalid
	}
}

// The error codes of Error.Code.
const (
	CodeArgumentInvalid      = "ArgumentInvalid"
	CodeMalformedJSON        = "MalformedJson"
	CodeDeviceNotFound       = "DeviceNotFound"
	CodeModuleNotFound       = "ModuleNotFound"
	CodeDeviceExists         = "DeviceAlreadyExists"
	CodeModuleExists         = "ModuleAlreadyExistsOnDevice"
	CodePreconditionFailed   = "PreconditionFailed"
	CodeConnectionSuperseded = "ConnectionSuperseded"
	CodeTooLarge             = "RequestEntityTooLarge"
	CodeTooManyModules       = "TooManyModulesOnDevice"
	CodeBadQuery             = "InvalidQuery"
)

func errf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Msg: fmt.Sprintf(format, args...)}
}

func invalidf(format string, args ...any) *Error {
	return errf(StatusBadRequest, CodeArgumentInvalid, format, args...)
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// AsError returns err's *Error, or a 400 ArgumentInvalid one carrying
// err's text.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return invalidf("%v", err)
}
