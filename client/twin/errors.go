package twin

import (
	"errors"

	tw "github.com/smartgo/smartgo/twin"
)

// Transport errors of package twin (client side). Callers test them with
// errors.Is.
var (
	// ErrBadOptions is wrapped by Options.Validate errors.
	ErrBadOptions = errors.New("twin client: invalid options")
	// ErrNoRoute: no broker route for SystemTopic (no broker hosts twins).
	ErrNoRoute = errors.New("twin client: no route")
	// ErrUnavailable: the owning broker could not be reached, or did not
	// own the shard, or could not append; nothing changed. Retrying later
	// is safe.
	ErrUnavailable = errors.New("twin client: shard unavailable")
	// ErrFailed: the broker answered with an error (a stopped shard, a
	// malformed request).
	ErrFailed = errors.New("twin client: broker error")
	// ErrClosed: the client is closed.
	ErrClosed = errors.New("twin client: closed")
	// ErrBadContinuation: a query continuation token is malformed or was
	// made for another shard layout.
	ErrBadContinuation = errors.New("twin client: bad continuation token")
	// ErrStale comes with a read's result (Options.ReplicaReads) when a
	// shard's master was unavailable and a slave answered from its
	// replica: the last state it applied, which may lag the master's.
	// The result is valid, read-only and possibly stale.
	ErrStale = errors.New("twin client: read from a slave's replica (the master is unavailable)")
)

// The engine's operation errors, re-exported: every failed operation
// returns an *Error that unwraps to one of them.
var (
	ErrInvalid      = tw.ErrInvalid      // 400: malformed JSON, a broken document rule, a bad field
	ErrNotFound     = tw.ErrNotFound     // 404: no such device or module
	ErrExists       = tw.ErrExists       // 409: a create found the identity
	ErrPrecondition = tw.ErrPrecondition // 412: If-Match, an expected $version, or a superseded connection
	ErrTooLarge     = tw.ErrTooLarge     // 413: a section or the body over its size limit
	ErrQuota        = tw.ErrQuota        // 403: too many modules on the device, or cloud-to-device messages queued for it
)

// Types shared with the engine, so front ends need only this package.
type (
	// Error is an operation's failure: Status (HTTP-style), Code (IoT
	// Hub's error code names), Msg (names the rule that failed).
	Error = tw.Error
	// Device is a device identity in IoT Hub's JSON shape.
	Device = tw.Device
	// Module is a module identity.
	Module = tw.Module
	// Authentication, SymmetricKey, X509Thumbprint and Capabilities are
	// parts of an identity.
	Authentication = tw.Authentication
	SymmetricKey   = tw.SymmetricKey
	X509Thumbprint = tw.X509Thumbprint
	Capabilities   = tw.Capabilities
	// DesiredChange is a watched twin's desired change: Patch is the
	// payload for $iothub/twin/PATCH/properties/desired/?$version=Version.
	DesiredChange = tw.DesiredChange
	// Request and Reply are the raw operation and its answer (Do).
	Request = tw.Request
	Reply   = tw.Reply
	// PutMode says whether a Put creates, updates, or either.
	PutMode = tw.PutMode
)

// Put modes.
const (
	PutUpsert = tw.PutUpsert
	PutCreate = tw.PutCreate
	PutUpdate = tw.PutUpdate
)

// TwinKey returns the key of a twin: deviceId, or deviceId/moduleId.
func TwinKey(deviceID, moduleID string) string { return tw.TwinKey(deviceID, moduleID) }
