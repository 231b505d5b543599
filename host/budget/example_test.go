package budget_test

import (
	"errors"
	"fmt"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/budget"
)

// A model call reserves its worst case before it is sent and settles what
// it used after; a call that does not fit is refused before anything
// leaves.
func Example() {
	token, _ := capability.ParseBudget("usd=10,model_calls=20")
	l := budget.New(budget.CeilingsOf(token, capability.Budget{}))
	price := budget.Price{Input: 3_000_000, Output: 15_000_000} // $3 and $15 per million tokens

	worst, _ := budget.WorstCase(200_000, 8_000, price) // estimated input, max output
	r, err := l.Reserve(1, worst)
	fmt.Println("reserved", worst, err)

	actual, _ := budget.Charge(budget.Usage{Input: 198_000, Output: 1_500}, price)
	settle, _ := l.Settle(r, actual)
	fmt.Println(settle)

	big, _ := budget.WorstCase(3_200_000, 8_000, price)
	_, err = l.Reserve(2, big)
	fmt.Println(errors.Is(err, budget.ErrBudget), err)
	// Output:
	// reserved model_calls=1 input_tokens=200000 output_tokens=8000 micro_usd=$0.72 <nil>
	// settle #1 model_calls=1 input_tokens=198000 output_tokens=1500 micro_usd=$0.6165
	// true budget exceeded: micro_usd: asked $9.72, $9.3835 left of $10 ($0.6165 spent, $0 reserved)
}
