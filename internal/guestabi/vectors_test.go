package guestabi

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	gabi "github.com/agentrt/agentrt/guest-sdk/abi"
	"github.com/agentrt/agentrt/internal/abivectors"
	"github.com/agentrt/agentrt/internal/testutil"
)

// The Go SDK's codec against the ABI vectors (abi/testdata/vectors, SPEC.md
// §11.1), read by the reader the C runner uses: every valid vector decodes
// and re-encodes to its bytes (an SDK sends the valid requests byte for
// byte), every invalid one is refused for the reason it names.

func readVectors() ([]*abivectors.Vector, error) {
	return abivectors.Read(filepath.Join(testutil.RepoRoot(), "abi", "testdata", "vectors"))
}

// guestBodies maps every op to constructors of its request and response
// types in the guest's package; nil stands for Empty.
var guestBodies = map[string]struct{ req, resp func() any }{
	"run.input":         {nil, func() any { return new(gabi.InputResponse) }},
	"run.set_output":    {func() any { return new(gabi.SetOutputRequest) }, nil},
	"run.log":           {func() any { return new(gabi.LogRequest) }, nil},
	"run.introspect":    {nil, func() any { return new(gabi.IntrospectResponse) }},
	"run.checkpoint":    {func() any { return new(gabi.CheckpointRequest) }, func() any { return new(gabi.CheckpointResponse) }},
	"run.limit":         {func() any { return new(gabi.LimitRequest) }, func() any { return new(gabi.LimitResponse) }},
	"run.self":          {nil, func() any { return new(gabi.SelfResponse) }},
	"run.self_caps":     {nil, func() any { return new(gabi.SelfCapsResponse) }},
	"run.self_may":      {func() any { return new(gabi.MayRequest) }, func() any { return new(gabi.MayResponse) }},
	"run.self_budget":   {nil, func() any { return new(gabi.SelfBudgetResponse) }},
	"run.self_mode":     {nil, func() any { return new(gabi.SelfModeResponse) }},
	"run.self_journal":  {func() any { return new(gabi.JournalRequest) }, func() any { return new(gabi.JournalResponse) }},
	"kv.get":            {func() any { return new(gabi.KVGetRequest) }, func() any { return new(gabi.KVGetResponse) }},
	"kv.put":            {func() any { return new(gabi.KVPutRequest) }, nil},
	"kv.delete":         {func() any { return new(gabi.KVDeleteRequest) }, func() any { return new(gabi.KVDeleteResponse) }},
	"kv.list":           {func() any { return new(gabi.KVListRequest) }, func() any { return new(gabi.KVListResponse) }},
	"http.request":      {func() any { return new(gabi.HTTPRequest) }, func() any { return new(gabi.HTTPResponse) }},
	"clock.now":         {nil, func() any { return new(gabi.ClockNowResponse) }},
	"random.bytes":      {func() any { return new(gabi.RandomBytesRequest) }, func() any { return new(gabi.RandomBytesResponse) }},
	"tool.run":          {func() any { return new(gabi.ToolRunRequest) }, func() any { return new(gabi.ToolRunResponse) }},
	"timer.sleep":       {func() any { return new(gabi.TimerSleepRequest) }, func() any { return new(gabi.TimerSleepResponse) }},
	"approval.request":  {func() any { return new(gabi.ApprovalRequest) }, func() any { return new(gabi.ApprovalResponse) }},
	"mcp.list_tools":    {func() any { return new(gabi.MCPListToolsRequest) }, func() any { return new(gabi.MCPListToolsResponse) }},
	"mcp.call_tool":     {func() any { return new(gabi.MCPCallToolRequest) }, func() any { return new(gabi.MCPCallToolResponse) }},
	"mcp.read_resource": {func() any { return new(gabi.MCPReadResourceRequest) }, func() any { return new(gabi.MCPReadResourceResponse) }},
	"mcp.get_prompt":    {func() any { return new(gabi.MCPGetPromptRequest) }, func() any { return new(gabi.MCPGetPromptResponse) }},
	"agent.spawn":       {func() any { return new(gabi.SpawnRequest) }, func() any { return new(gabi.SpawnResponse) }},
	"agent.await":       {func() any { return new(gabi.RunRef) }, func() any { return new(gabi.AwaitResponse) }},
	"agent.cancel":      {func() any { return new(gabi.RunRef) }, nil},
	"agent.children":    {nil, func() any { return new(gabi.ChildrenResponse) }},
}

// reasonOf names the failure class of a guest decoding error as SPEC.md
// §11.1 does.
func reasonOf(err error) string {
	var de *gabi.DecodeError
	switch {
	case errors.Is(err, gabi.ErrNotCanonical):
		return "not-canonical"
	case errors.As(err, &de):
		return de.Reason
	}
	return "other: " + err.Error()
}

func TestVectors(t *testing.T) {
	vs, err := readVectors()
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) < 100 {
		t.Fatalf("only %d vectors", len(vs))
	}
	for _, v := range vs {
		t.Run(strings.TrimSuffix(v.File, ".txt"), func(t *testing.T) {
			var body any = new(gabi.Error)
			if v.Kind != "error" {
				b, ok := guestBodies[v.Op]
				if !ok {
					t.Fatalf("unknown op %q", v.Op)
				}
				mk := b.resp
				if v.Kind == "request" {
					mk = b.req
				}
				body = new(gabi.Empty)
				if mk != nil {
					body = mk()
				}
			}
			err := gabi.Unmarshal(v.Data, body)
			if v.Expect == "invalid" {
				if err == nil {
					t.Fatalf("decoded into %+v, want a %s error", body, v.Reason)
				}
				if got := reasonOf(err); got != v.Reason {
					t.Fatalf("refused as %s (%v), want %s", got, err, v.Reason)
				}
				if v.Reason == "truncated" && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("%v does not match io.ErrUnexpectedEOF", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("decode %T: %v", body, err)
			}
			if len(v.Data) == 0 {
				if zero := reflect.New(reflect.TypeOf(body).Elem()).Interface(); !reflect.DeepEqual(body, zero) {
					t.Fatalf("empty body decoded to %+v", body)
				}
				return
			}
			again, err := gabi.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, v.Data) {
				t.Fatalf("re-encoded %T to\n%x, want\n%x", body, again, v.Data)
			}
		})
	}
}
