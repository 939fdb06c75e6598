package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// Sentinel errors of the client package. Every error a call returns wraps
// one of them (or a context error); callers test with errors.Is.
var (
	// ErrNoRoute: no registry knows a usable route (no writable or readable
	// queue) for the topic.
	ErrNoRoute = errors.New("client: no route for topic")
	// ErrTopicNotExist: the registry or broker says the topic does not exist
	// (and it may not be auto-created).
	ErrTopicNotExist = errors.New("client: topic does not exist")
	// ErrBrokerUnavailable: a broker could not be reached, its connection
	// broke during the call, or it answered SERVICE_NOT_AVAILABLE.
	ErrBrokerUnavailable = errors.New("client: broker unavailable")
	// ErrRegistryUnavailable: none of the configured registries answered.
	ErrRegistryUnavailable = errors.New("client: no registry available")
	// ErrTimeout: the call's deadline passed before a response arrived.
	ErrTimeout = errors.New("client: timed out")
	// ErrClosed: the producer or consumer was closed.
	ErrClosed = errors.New("client: closed")
	// ErrBadOptions: invalid options.
	ErrBadOptions = errors.New("client: invalid options")
	// ErrBadMessage: a message fails client-side validation (empty topic or
	// body, bad property, batch with mixed topics...).
	ErrBadMessage = errors.New("client: invalid message")
	// ErrNoPermission: the broker refused the operation (NO_PERMISSION).
	ErrNoPermission = errors.New("client: no permission")
	// ErrOffsetFile: a broadcasting consumer's local offsets file is
	// damaged (cut, empty, not a JSON object, a key that names no queue).
	// The consumer does not start rather than consume again from its
	// first-start position; restore the file or delete it.
	ErrOffsetFile = errors.New("client: damaged local offsets file")
	// ErrBusy: the broker is overloaded (SYSTEM_BUSY, FLOW_CONTROL).
	ErrBusy = errors.New("client: broker busy")
	// ErrBrokerError: the broker answered with an error code; the error is a
	// *BrokerError carrying the code.
	ErrBrokerError = errors.New("client: broker error")
	// ErrGroupNotExist: the broker knows no such consumer group
	// (SUBSCRIPTION_GROUP_NOT_EXIST).
	ErrGroupNotExist = errors.New("client: consumer group does not exist")
	// ErrNotFound: a queried message or offset does not exist.
	ErrNotFound = errors.New("client: not found")
	// ErrNotStarted: a consumer call that needs Start was made before it.
	ErrNotStarted = errors.New("client: not started")
	// ErrBadSubscription: a broker refused a subscription: a SQL92
	// selector that does not compile (SUBSCRIPTION_PARSE_FAILED), or one
	// sent to a broker with property filters off.
	ErrBadSubscription = errors.New("client: subscription refused")
	// ErrDiskFull: the broker refused a send because its disk is full
	// (SERVICE_NOT_AVAILABLE with the refusal protocol.RefusalDiskFull; the
	// error also matches ErrBrokerUnavailable), or the topic has no
	// writable queue because every master's disk is full
	// (protocol.PermDiskFull; the error also matches ErrNoRoute).
	ErrDiskFull = errors.New("client: broker disk full")
)

// BrokerError is an error response from a broker or registry.
type BrokerError struct {
	Addr   string // who answered
	Op     string // request name, e.g. "send"
	Code   int32  // RocketMQ response code
	Remark string
	// Refusal is the cause a SmartGo broker names beside the code
	// (protocol.FieldRefusal), "" when none.
	Refusal string
}

// Error implements error.
func (e *BrokerError) Error() string {
	return fmt.Sprintf("client: %s to %s: code %d: %s", e.Op, e.Addr, e.Code, e.Remark)
}

// Is maps response codes onto the package's sentinels.
func (e *BrokerError) Is(target error) bool {
	switch target {
	case ErrBrokerError:
		return true
	case ErrTopicNotExist:
		return e.Code == protocol.TopicNotExist
	case ErrNoPermission:
		return e.Code == protocol.NoPermission
	case ErrBusy:
		return e.Code == protocol.SystemBusy || e.Code == protocol.FlowControl
	case ErrBrokerUnavailable:
		return e.Code == protocol.ServiceNotAvailable
	case ErrDiskFull:
		return e.Code == protocol.ServiceNotAvailable && e.Refusal == protocol.RefusalDiskFull
	case ErrBadMessage:
		return e.Code == protocol.MessageIllegal
	case ErrNotFound:
		return e.Code == protocol.QueryNotFound
	case ErrGroupNotExist:
		return e.Code == protocol.SubscriptionGroupNotExist
	case ErrBadSubscription:
		return e.Code == protocol.SubscriptionParseFailed || e.Op == opCheckSubscription
	}
	return false
}

// newBrokerError builds the error of a non-success response.
func newBrokerError(op, addr string, resp *protocol.Command) error {
	return &BrokerError{Addr: addr, Op: op, Code: resp.Code, Remark: resp.Remark, Refusal: resp.Fields()[protocol.FieldRefusal]}
}

// wrapCallErr classifies a remoting error: timeouts become ErrTimeout,
// dial failures and broken connections ErrBrokerUnavailable, a closed
// client ErrClosed.
func wrapCallErr(op, addr string, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, remoting.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %s to %s: %w", ErrTimeout, op, addr, err)
	case errors.Is(err, remoting.ErrClosed):
		return fmt.Errorf("%w: %s to %s: %w", ErrClosed, op, addr, err)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("client: %s to %s: %w", op, addr, err)
	default:
		return fmt.Errorf("%w: %s to %s: %w", ErrBrokerUnavailable, op, addr, err)
	}
}

// retryableCode reports the response codes after which a send is retried
// on another broker (RocketMQ's list).
func retryableCode(code int32) bool {
	switch code {
	case protocol.TopicNotExist, protocol.ServiceNotAvailable, protocol.SystemError,
		protocol.NoPermission, protocol.NoBuyerID, protocol.NotInCurrentUnit:
		return true
	}
	return false
}

// retryableErr reports whether a failed send may be retried elsewhere.
func retryableErr(err error) bool {
	var be *BrokerError
	if errors.As(err, &be) {
		return retryableCode(be.Code)
	}
	return errors.Is(err, ErrBrokerUnavailable) && !errors.Is(err, ErrClosed)
}
