package statestore

import (
	"errors"
	"fmt"
)

// Go-level sentinel errors of the statestore package. Callers test them
// with errors.Is.
var (
	// ErrCorrupt is wrapped by every error about a log entry or snapshot
	// whose bytes are not well formed (bad magic, lengths that do not add
	// up, a checksum mismatch). The engine is left unchanged.
	ErrCorrupt = errors.New("statestore: corrupt")

	// ErrUnsupportedFormat means a log entry or snapshot carries a format
	// version this build does not know (written by a newer SmartGo).
	ErrUnsupportedFormat = errors.New("statestore: unsupported format version")

	// ErrBadHLC means a string is not a hybrid logical clock of the form
	// {ms}:{counter}:{node id}.
	ErrBadHLC = errors.New("statestore: malformed hlc")

	// ErrBadRESP means bytes are not a well-formed RESP3 value of the
	// shapes this package reads (see ParseRequest and DecodeReply).
	ErrBadRESP = errors.New("statestore: malformed resp")

	// ErrBadNotification means a NOTIFY payload is not one of the two
	// shapes the protocol defines.
	ErrBadNotification = errors.New("statestore: malformed notification")

	// ErrBadOptions is wrapped by Options.Validate errors.
	ErrBadOptions = errors.New("statestore: invalid options")
)

// ServiceError is an error the state store reports to a client inside the
// reply payload, as "-ERR <text>\r\n" (the MQTT response still carries
// __stat=200). The constant's value is the exact text on the wire; the
// client SDKs match some of these strings byte for byte, so they are
// FROZEN. Errors returned by ParseCommand wrap one of them, and
// Value.Err turns a decoded error reply back into one, so callers can
// use errors.Is on both sides.
type ServiceError string

// Error returns the text prefixed with the package name.
func (e ServiceError) Error() string { return "statestore: " + string(e) }

// Text returns the text exactly as it goes on the wire after "-ERR ".
func (e ServiceError) Text() string { return string(e) }

// The protocol's error texts (docs/protocols.md), then SmartGo's
// own for its extensions.
const (
	// ErrTimestampSkew: the request's __ts is more than MaxClockSkew ahead
	// of the store's clock.
	ErrTimestampSkew ServiceError = "the request timestamp is too far in the future; ensure that the client and broker system clocks are synchronized"

	// ErrFencingRequired: the key is protected by a fencing token and the
	// request carries no __ft.
	ErrFencingRequired ServiceError = "a fencing token is required for this request"

	// ErrFencingSkew: the request's __ft is more than MaxClockSkew ahead of
	// the store's clock.
	ErrFencingSkew ServiceError = "the request fencing token timestamp is too far in the future; ensure that the client and broker system clocks are synchronized"

	// ErrFencingStale: the request's __ft is older than the token that
	// protects the key.
	ErrFencingStale ServiceError = "the request fencing token is a lower version than the fencing token protecting the resource"

	// ErrQuota: a key or byte quota (Options.MaxKeys, MaxBytes,
	// MaxKeySize, MaxValueSize, MaxWatchesPerClient, MaxTopicLen for a
	// KEYNOTIFY's notification topic) would be exceeded.
	ErrQuota ServiceError = "the quota has been exceeded"

	// ErrSyntax: the payload is not a RESP3 array of bulk strings, or an
	// option is unknown, repeated, conflicting or has a bad argument.
	ErrSyntax ServiceError = "syntax error"

	// ErrNotAuthorized: the front end refused the request (the engine
	// itself never returns it; it is here so every text lives in one
	// place).
	ErrNotAuthorized ServiceError = "not authorized"

	// ErrUnknownCommand: the verb is not SET, GET, DEL, VDEL or KEYNOTIFY.
	ErrUnknownCommand ServiceError = "unknown command"

	// ErrArity: the verb has too few or too many arguments.
	ErrArity ServiceError = "wrong number of arguments"

	// ErrMissingTimestamp: a SET without the __ts user property.
	ErrMissingTimestamp ServiceError = "missing timestamp"

	// ErrMalformedTimestamp: __ts, __ft (or a KEYNOTIFY SINCE version)
	// is not an HLC.
	ErrMalformedTimestamp ServiceError = "malformed timestamp"

	// ErrEmptyKey: the key is the empty string.
	ErrEmptyKey ServiceError = "the key length is zero"

	// ErrHistoryTooOld (extension): a resumable KEYNOTIFY ... SINCE asked
	// for changes older than the engine's bounded change history still
	// holds. The client must read the current value and watch afresh.
	ErrHistoryTooOld ServiceError = "the requested version is no longer in the change history"

	// ErrMissingClientID (extension): a KEYNOTIFY reached the engine with
	// no client id; only a front-end bug can cause it.
	ErrMissingClientID ServiceError = "missing client id"
)

// serviceText returns the wire text for err: the ServiceError it wraps, or
// "syntax error" for anything else (the engine only produces wrapped
// ServiceErrors, so the fallback is defensive).
func serviceText(err error) ServiceError {
	var se ServiceError
	if errors.As(err, &se) {
		return se
	}
	return ErrSyntax
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}
