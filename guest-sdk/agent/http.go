package agent

import "github.com/agentrt/agentrt/guest-sdk/abi"

// HTTPRequest is an HTTP request made through the host (http.request).
type HTTPRequest = abi.HTTPRequest

// Header is one HTTP header field, in HTTPRequest.Headers and
// HTTPResponse.Headers: a list, so that order and repeated names survive.
type Header = abi.Header

// HTTPResponse is the host's answer to an HTTPRequest.
type HTTPResponse = abi.HTTPResponse

// HTTPDo performs req. It is an effect: journaled before it is sent, and
// sent with an Idempotency-Key header derived from the run and the step.
// Hosts outside the grant give an error matching ErrDenied.
func HTTPDo(req *HTTPRequest) (*HTTPResponse, error) {
	var r abi.HTTPResponse
	if err := call(httpTransport, abi.CapHTTP, abi.OpHTTPRequest, req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// HTTPGet performs a GET of url.
func HTTPGet(url string) (*HTTPResponse, error) {
	return HTTPDo(&HTTPRequest{Method: "GET", URL: url})
}
