package guestabi

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/abi"
	gabi "github.com/agentrt/agentrt/guest-sdk/abi"
	"github.com/agentrt/agentrt/internal/testutil"
	"pgregory.net/rapid"
)

// The guest's codec (guest-sdk/abi/codec.go, the standard library alone)
// against the host's (abi, fxamacker/cbor): for every body type, the same
// bytes for the same value, and the same answer (the same value, or a
// refusal) for the same bytes, on random values, on random changes of
// their encodings and under the fuzzer.

// pair is one body type in both packages.
type pair struct {
	host, guest reflect.Type
}

var pairs = []pair{
	{reflect.TypeFor[abi.Empty](), reflect.TypeFor[gabi.Empty]()},
	{reflect.TypeFor[abi.InputResponse](), reflect.TypeFor[gabi.InputResponse]()},
	{reflect.TypeFor[abi.CheckpointRequest](), reflect.TypeFor[gabi.CheckpointRequest]()},
	{reflect.TypeFor[abi.CheckpointResponse](), reflect.TypeFor[gabi.CheckpointResponse]()},
	{reflect.TypeFor[abi.CheckpointBudget](), reflect.TypeFor[gabi.CheckpointBudget]()},
	{reflect.TypeFor[abi.BudgetHolding](), reflect.TypeFor[gabi.BudgetHolding]()},
	{reflect.TypeFor[abi.BudgetLimit](), reflect.TypeFor[gabi.BudgetLimit]()},
	{reflect.TypeFor[abi.LimitRequest](), reflect.TypeFor[gabi.LimitRequest]()},
	{reflect.TypeFor[abi.LimitResponse](), reflect.TypeFor[gabi.LimitResponse]()},
	{reflect.TypeFor[abi.SetOutputRequest](), reflect.TypeFor[gabi.SetOutputRequest]()},
	{reflect.TypeFor[abi.LogRequest](), reflect.TypeFor[gabi.LogRequest]()},
	{reflect.TypeFor[abi.IntrospectResponse](), reflect.TypeFor[gabi.IntrospectResponse]()},
	{reflect.TypeFor[abi.SelfResponse](), reflect.TypeFor[gabi.SelfResponse]()},
	{reflect.TypeFor[abi.SelfCapsResponse](), reflect.TypeFor[gabi.SelfCapsResponse]()},
	{reflect.TypeFor[abi.MayRequest](), reflect.TypeFor[gabi.MayRequest]()},
	{reflect.TypeFor[abi.MayResponse](), reflect.TypeFor[gabi.MayResponse]()},
	{reflect.TypeFor[abi.SelfBudget](), reflect.TypeFor[gabi.SelfBudget]()},
	{reflect.TypeFor[abi.SelfBudgetResponse](), reflect.TypeFor[gabi.SelfBudgetResponse]()},
	{reflect.TypeFor[abi.ModeRule](), reflect.TypeFor[gabi.ModeRule]()},
	{reflect.TypeFor[abi.SelfModeResponse](), reflect.TypeFor[gabi.SelfModeResponse]()},
	{reflect.TypeFor[abi.JournalRequest](), reflect.TypeFor[gabi.JournalRequest]()},
	{reflect.TypeFor[abi.JournalEntry](), reflect.TypeFor[gabi.JournalEntry]()},
	{reflect.TypeFor[abi.JournalResponse](), reflect.TypeFor[gabi.JournalResponse]()},
	{reflect.TypeFor[abi.KVGetRequest](), reflect.TypeFor[gabi.KVGetRequest]()},
	{reflect.TypeFor[abi.KVGetResponse](), reflect.TypeFor[gabi.KVGetResponse]()},
	{reflect.TypeFor[abi.KVPutRequest](), reflect.TypeFor[gabi.KVPutRequest]()},
	{reflect.TypeFor[abi.KVDeleteRequest](), reflect.TypeFor[gabi.KVDeleteRequest]()},
	{reflect.TypeFor[abi.KVDeleteResponse](), reflect.TypeFor[gabi.KVDeleteResponse]()},
	{reflect.TypeFor[abi.KVListRequest](), reflect.TypeFor[gabi.KVListRequest]()},
	{reflect.TypeFor[abi.KVListResponse](), reflect.TypeFor[gabi.KVListResponse]()},
	{reflect.TypeFor[abi.Header](), reflect.TypeFor[gabi.Header]()},
	{reflect.TypeFor[abi.HTTPRequest](), reflect.TypeFor[gabi.HTTPRequest]()},
	{reflect.TypeFor[abi.HTTPResponse](), reflect.TypeFor[gabi.HTTPResponse]()},
	{reflect.TypeFor[abi.ClockNowResponse](), reflect.TypeFor[gabi.ClockNowResponse]()},
	{reflect.TypeFor[abi.TimerSleepRequest](), reflect.TypeFor[gabi.TimerSleepRequest]()},
	{reflect.TypeFor[abi.TimerSleepResponse](), reflect.TypeFor[gabi.TimerSleepResponse]()},
	{reflect.TypeFor[abi.ApprovalRequest](), reflect.TypeFor[gabi.ApprovalRequest]()},
	{reflect.TypeFor[abi.SpawnRequest](), reflect.TypeFor[gabi.SpawnRequest]()},
	{reflect.TypeFor[abi.SpawnResponse](), reflect.TypeFor[gabi.SpawnResponse]()},
	{reflect.TypeFor[abi.RunRef](), reflect.TypeFor[gabi.RunRef]()},
	{reflect.TypeFor[abi.AwaitResponse](), reflect.TypeFor[gabi.AwaitResponse]()},
	{reflect.TypeFor[abi.Child](), reflect.TypeFor[gabi.Child]()},
	{reflect.TypeFor[abi.ChildrenResponse](), reflect.TypeFor[gabi.ChildrenResponse]()},
	{reflect.TypeFor[abi.ApprovalResponse](), reflect.TypeFor[gabi.ApprovalResponse]()},
	{reflect.TypeFor[abi.MCPListToolsRequest](), reflect.TypeFor[gabi.MCPListToolsRequest]()},
	{reflect.TypeFor[abi.MCPListToolsResponse](), reflect.TypeFor[gabi.MCPListToolsResponse]()},
	{reflect.TypeFor[abi.MCPTool](), reflect.TypeFor[gabi.MCPTool]()},
	{reflect.TypeFor[abi.MCPCallToolRequest](), reflect.TypeFor[gabi.MCPCallToolRequest]()},
	{reflect.TypeFor[abi.MCPCallToolResponse](), reflect.TypeFor[gabi.MCPCallToolResponse]()},
	{reflect.TypeFor[abi.MCPReadResourceRequest](), reflect.TypeFor[gabi.MCPReadResourceRequest]()},
	{reflect.TypeFor[abi.MCPReadResourceResponse](), reflect.TypeFor[gabi.MCPReadResourceResponse]()},
	{reflect.TypeFor[abi.MCPResourceContents](), reflect.TypeFor[gabi.MCPResourceContents]()},
	{reflect.TypeFor[abi.MCPGetPromptRequest](), reflect.TypeFor[gabi.MCPGetPromptRequest]()},
	{reflect.TypeFor[abi.MCPPrompt](), reflect.TypeFor[gabi.MCPPrompt]()},
	{reflect.TypeFor[abi.MCPGetPromptResponse](), reflect.TypeFor[gabi.MCPGetPromptResponse]()},
	{reflect.TypeFor[abi.MCPPromptMessage](), reflect.TypeFor[gabi.MCPPromptMessage]()},
	{reflect.TypeFor[abi.RandomBytesRequest](), reflect.TypeFor[gabi.RandomBytesRequest]()},
	{reflect.TypeFor[abi.RandomBytesResponse](), reflect.TypeFor[gabi.RandomBytesResponse]()},
	{reflect.TypeFor[abi.ToolRunRequest](), reflect.TypeFor[gabi.ToolRunRequest]()},
	{reflect.TypeFor[abi.ToolFile](), reflect.TypeFor[gabi.ToolFile]()},
	{reflect.TypeFor[abi.ToolRunResponse](), reflect.TypeFor[gabi.ToolRunResponse]()},
	{reflect.TypeFor[abi.LLMPart](), reflect.TypeFor[gabi.LLMPart]()},
	{reflect.TypeFor[abi.LLMMessage](), reflect.TypeFor[gabi.LLMMessage]()},
	{reflect.TypeFor[abi.LLMTool](), reflect.TypeFor[gabi.LLMTool]()},
	{reflect.TypeFor[abi.LLMFormat](), reflect.TypeFor[gabi.LLMFormat]()},
	{reflect.TypeFor[abi.LLMRequest](), reflect.TypeFor[gabi.LLMRequest]()},
	{reflect.TypeFor[abi.LLMUsage](), reflect.TypeFor[gabi.LLMUsage]()},
	{reflect.TypeFor[abi.LLMResponse](), reflect.TypeFor[gabi.LLMResponse]()},
	{reflect.TypeFor[abi.LLMChunk](), reflect.TypeFor[gabi.LLMChunk]()},
	{reflect.TypeFor[abi.LLMBatch](), reflect.TypeFor[gabi.LLMBatch]()},
	{reflect.TypeFor[abi.LLMCursor](), reflect.TypeFor[gabi.LLMCursor]()},
	{reflect.TypeFor[abi.LLMNextRequest](), reflect.TypeFor[gabi.LLMNextRequest]()},
	{reflect.TypeFor[abi.Error](), reflect.TypeFor[gabi.Error]()},
}

// TestPairsCoverEveryType: every struct type of the guest's copy is in
// pairs, so a type added to the ABI is tested at once.
func TestPairsCoverEveryType(t *testing.T) {
	dir := filepath.Join(testutil.RepoRoot(), "guest-sdk", "abi")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var structs []string
	for _, e := range entries {
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			// A body is a struct with a cbor tag (Header's is on its _
			// field) or no fields at all (Empty); Op and DecodeError are
			// not bodies.
			if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.IsExported() {
				if st, ok := ts.Type.(*ast.StructType); ok && (len(st.Fields.List) == 0 || slices.ContainsFunc(st.Fields.List, func(f *ast.Field) bool {
					return f.Tag != nil && strings.Contains(f.Tag.Value, "cbor:")
				})) {
					structs = append(structs, ts.Name.Name)
				}
			}
			return true
		})
	}
	slices.Sort(structs)
	var paired []string
	for _, p := range pairs {
		if p.host.Name() != p.guest.Name() {
			t.Errorf("pair %s / %s", p.host, p.guest)
		}
		paired = append(paired, p.guest.Name())
	}
	slices.Sort(paired)
	if !slices.Equal(structs, paired) {
		t.Fatalf("struct types %v, pairs %v", structs, paired)
	}
}

// draw makes a random value of t, a type of the ABI: strings that are
// sometimes not UTF-8, byte strings and lists that are nil, empty or not,
// integers at their edges.
func draw(rt *rapid.T, t reflect.Type, label string) reflect.Value {
	v := reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.Bool:
		v.SetBool(rapid.Bool().Draw(rt, label))
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		max := uint64(math.MaxUint64) >> (64 - t.Bits())
		v.SetUint(rapid.OneOf(rapid.Uint64Range(0, 30), rapid.SampledFrom([]uint64{23, 24, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, max}),
			rapid.Uint64Range(0, max)).Filter(func(n uint64) bool { return n <= max }).Draw(rt, label))
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(rapid.OneOf(rapid.Int64Range(-30, 30), rapid.SampledFrom([]int64{-24, -25, -256, -257, math.MinInt64, math.MaxInt64}),
			rapid.Int64()).Draw(rt, label))
	case reflect.String:
		if rapid.Bool().Draw(rt, label+".utf8") {
			v.SetString(rapid.StringN(0, 30, -1).Draw(rt, label))
		} else {
			v.SetString(string(rapid.SliceOfN(rapid.Byte(), 0, 30).Draw(rt, label)))
		}
	case reflect.Slice:
		switch rapid.IntRange(0, 2).Draw(rt, label+".form") {
		case 0: // nil
		case 1:
			v.Set(reflect.MakeSlice(t, 0, 0))
		default:
			if t.Elem().Kind() == reflect.Uint8 {
				v.SetBytes(rapid.SliceOfN(rapid.Byte(), 1, 40).Draw(rt, label))
				break
			}
			n := rapid.IntRange(1, 3).Draw(rt, label+".len")
			s := reflect.MakeSlice(t, n, n)
			for i := range n {
				s.Index(i).Set(draw(rt, t.Elem(), fmt.Sprintf("%s[%d]", label, i)))
			}
			v.Set(s)
		}
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if f.IsExported() {
				v.Field(i).Set(draw(rt, f.Type, label+"."+f.Name))
			}
		}
	case reflect.Pointer: // an optional value (llm's sampling, format, usage): nil or set
		if rapid.Bool().Draw(rt, label+".set") {
			p := reflect.New(t.Elem())
			p.Elem().Set(draw(rt, t.Elem(), label))
			v.Set(p)
		}
	default:
		rt.Fatalf("cannot draw %s", t)
	}
	return v
}

// convert copies src into a new value of type t, a type of the same shape
// in the other package.
func convert(src reflect.Value, t reflect.Type) reflect.Value {
	dst := reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.Slice:
		if src.IsNil() {
			return dst
		}
		if t.Elem().Kind() == reflect.Uint8 {
			dst.SetBytes(slices.Clone(src.Bytes()))
			return dst
		}
		s := reflect.MakeSlice(t, src.Len(), src.Len())
		for i := range src.Len() {
			s.Index(i).Set(convert(src.Index(i), t.Elem()))
		}
		dst.Set(s)
	case reflect.Pointer:
		if src.IsNil() {
			return dst
		}
		p := reflect.New(t.Elem())
		p.Elem().Set(convert(src.Elem(), t.Elem()))
		dst.Set(p)
	case reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				dst.Field(i).Set(convert(src.FieldByName(t.Field(i).Name), t.Field(i).Type))
			}
		}
	default:
		dst.Set(src.Convert(t))
	}
	return dst
}

// fataler is what testing.T and rapid.T share.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// decodeBoth decodes data with both codecs and fails unless they agree:
// both refuse, or both accept the same value. It reports whether they
// accepted.
func decodeBoth(t fataler, p pair, data []byte) bool {
	t.Helper()
	hv := reflect.New(p.host)
	herr := abi.Unmarshal(data, hv.Interface())
	gv := reflect.New(p.guest)
	gerr := gabi.Unmarshal(data, gv.Interface())
	if (herr == nil) != (gerr == nil) {
		t.Fatalf("%s %x: host %v, guest %v", p.host.Name(), data, herr, gerr)
	}
	if herr != nil {
		// Which check refuses a body with several faults may differ (the
		// host's decoder matches keys case-insensitively and then finds
		// the body not canonical; the guest's finds an unknown field):
		// the vectors hold each single fault to its class.
		return false
	}
	if got := convert(gv.Elem(), p.host); !reflect.DeepEqual(got.Interface(), hv.Elem().Interface()) {
		t.Fatalf("%s %x: host decoded %#v, guest %#v", p.host.Name(), data, hv.Elem().Interface(), gv.Elem().Interface())
	}
	return true
}

// TestCodecMatchesHost: random values encode to the same bytes with both
// codecs, and those bytes, and random changes of them, decode alike.
func TestCodecMatchesHost(t *testing.T) {
	for _, p := range pairs {
		t.Run(p.host.Name(), rapid.MakeCheck(func(rt *rapid.T) {
			hv := draw(rt, p.host, "v")
			hb, herr := abi.Marshal(hv.Interface())
			gb, gerr := gabi.Marshal(convert(hv, p.guest).Interface())
			if herr != nil || gerr != nil {
				rt.Fatalf("marshal: host %v, guest %v", herr, gerr)
			}
			if !bytes.Equal(hb, gb) {
				rt.Fatalf("%#v:\n host %x\nguest %x", hv.Interface(), hb, gb)
			}
			decodeBoth(rt, p, hb)
			// One change of the encoding: a byte replaced, inserted or
			// removed, or the body cut short.
			if len(hb) == 0 {
				return
			}
			b := slices.Clone(hb)
			i := rapid.IntRange(0, len(b)-1).Draw(rt, "at")
			switch rapid.IntRange(0, 3).Draw(rt, "change") {
			case 0:
				b[i] = rapid.Byte().Draw(rt, "byte")
			case 1:
				b = slices.Insert(b, i, rapid.Byte().Draw(rt, "byte"))
			case 2:
				b = slices.Delete(b, i, i+1)
			case 3:
				b = b[:i]
			}
			decodeBoth(rt, p, b)
		}))
	}
}

// TestCodecEdges: bodies the random changes seldom make.
func TestCodecEdges(t *testing.T) {
	kvGet := pairs[slices.IndexFunc(pairs, func(p pair) bool { return p.host.Name() == "KVGetResponse" })]
	list := pairs[slices.IndexFunc(pairs, func(p pair) bool { return p.host.Name() == "KVListResponse" })]
	deep := []byte{0xa2, 0x64, 'k', 'e', 'y', 's'}
	for range 20 {
		deep = append(deep, 0x81)
	}
	deep = append(deep, 0x60, 0x64, 'm', 'o', 'r', 'e', 0xf4)
	for _, tc := range []struct {
		name string
		p    pair
		data []byte
		ok   bool
	}{
		{"empty body", kvGet, nil, true},
		{"null value", kvGet, []byte{0xa1, 0x65, 'v', 'a', 'l', 'u', 'e', 0xf6}, true},
		{"a byte string longer than the body", kvGet, []byte{0xa1, 0x65, 'v', 'a', 'l', 'u', 'e', 0x5b, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, false},
		{"an array longer than the body", list, []byte{0xa2, 0x64, 'k', 'e', 'y', 's', 0x9b, 0, 0, 0, 1, 0, 0, 0, 0}, false},
		{"nested past the limit", list, deep, false},
		{"a map key that is not text", kvGet, []byte{0xa1, 0x01, 0x40}, false},
		{"reserved additional information", kvGet, []byte{0xa1, 0x65, 'v', 'a', 'l', 'u', 'e', 0x5c}, false},
		{"a break outside an indefinite item", kvGet, []byte{0xff}, false},
		{"undefined for bytes", kvGet, []byte{0xa1, 0x65, 'v', 'a', 'l', 'u', 'e', 0xf7}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decodeBoth(t, tc.p, tc.data); got != tc.ok {
				t.Fatalf("accepted %v, want %v", got, tc.ok)
			}
		})
	}
}

// FuzzCodecMatchesHost decodes arbitrary bytes as the body type which
// selects, with both codecs: they must agree, and neither may panic.
func FuzzCodecMatchesHost(f *testing.F) {
	vs, err := readVectors()
	if err != nil {
		f.Fatal(err)
	}
	for _, v := range vs {
		// Each vector as the type it is a body of.
		name := "Error"
		if v.Kind != "error" {
			b := guestBodies[v.Op]
			mk := b.resp
			if v.Kind == "request" {
				mk = b.req
			}
			name = "Empty"
			if mk != nil {
				name = reflect.TypeOf(mk()).Elem().Name()
			}
		}
		f.Add(uint8(slices.IndexFunc(pairs, func(p pair) bool { return p.guest.Name() == name })), v.Data)
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		decodeBoth(t, pairs[int(which)%len(pairs)], data)
	})
}

// BenchmarkCodec compares the two codecs on a request and a response a
// Go agent sends and reads on every kv call: what the guest pays per call
// (natively here; in wasm both cost more alike).
func BenchmarkCodec(b *testing.B) {
	req := &abi.KVPutRequest{Key: "page/https://example.com/a", Value: make([]byte, 64)}
	greq := &gabi.KVPutRequest{Key: req.Key, Value: req.Value}
	resp, err := abi.Marshal(&abi.KVGetResponse{Value: make([]byte, 64)})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("marshal/host", func(b *testing.B) {
		for range b.N {
			if _, err := abi.Marshal(req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("marshal/guest", func(b *testing.B) {
		for range b.N {
			if _, err := gabi.Marshal(greq); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unmarshal/host", func(b *testing.B) {
		for range b.N {
			var r abi.KVGetResponse
			if err := abi.Unmarshal(resp, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unmarshal/guest", func(b *testing.B) {
		for range b.N {
			var r gabi.KVGetResponse
			if err := gabi.Unmarshal(resp, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
