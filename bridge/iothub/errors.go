package iothub

import "errors"

// Sentinel errors of package iothub. Callers test with errors.Is.
var (
	// ErrInvalidOptions wraps every Options.Validate failure.
	ErrInvalidOptions = errors.New("iothub: invalid options")
	// ErrClosed: the hub is closed (or not started).
	ErrClosed = errors.New("iothub: closed")
	// ErrStartTimeout: Start did not get the registries and brokers it
	// needs within Options.StartTimeout.
	ErrStartTimeout = errors.New("iothub: start timed out")

	// ErrBadToken: a SAS token is malformed.
	ErrBadToken = errors.New("iothub: malformed SAS token")
	// ErrTokenExpired: a SAS token's expiry has passed.
	ErrTokenExpired = errors.New("iothub: SAS token expired")
	// ErrBadSignature: a SAS token's signature does not match the key.
	ErrBadSignature = errors.New("iothub: SAS token signature does not match")
	// ErrUnauthorized: the credential is valid but does not grant what
	// was asked (another resource, a missing permission, an unknown
	// policy or device, a disabled identity).
	ErrUnauthorized = errors.New("iothub: unauthorized")

	// ErrBadRequest: a device or back-end request is malformed (a topic
	// without $rid, a bad method name, a body that is not JSON).
	ErrBadRequest = errors.New("iothub: bad request")
	// ErrDeviceNotOnline: a direct method found the device connected to
	// no node, or not subscribed to methods (404).
	ErrDeviceNotOnline = errors.New("iothub: device not online")
	// ErrMethodTimeout: the device did not answer a direct method in time
	// (504).
	ErrMethodTimeout = errors.New("iothub: method response timeout")
	// ErrThrottled: a device sent twin requests faster than its rate
	// (429), or its session queue is full.
	ErrThrottled = errors.New("iothub: throttled")
	// ErrTooLarge: a message or body is over its limit (413).
	ErrTooLarge = errors.New("iothub: too large")
	// ErrResponseTooLarge: a device answered a direct method with a
	// payload over MaxMethodPayload (413 MessageTooLarge); the caller
	// gets it as soon as the answer comes, without the payload.
	ErrResponseTooLarge = errors.New("iothub: method response too large")
)
