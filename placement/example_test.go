package placement_test

import (
	"fmt"

	"github.com/agentrt/agentrt/placement"
)

// A run needing confidential clearance in the EU, on cells that report
// themselves: the cheaper one is below the clearance, so the other wins.
func ExamplePlace() {
	cells := []placement.Cell{
		{ID: "d028590f7fa9b556e743fa6523c61003227c4240a5346f9aacff374199fe8958", Name: "gpu-eu-1", Running: 2, MaxRuns: 8,
			Cost: 3_200_000, Clearance: placement.Confidential, Labels: map[string]string{"region": "eu"}},
		{ID: "d08e0059da844ca0887516d4fc49f46141b00a3304630e3ad9f7192f412f8813", Name: "edge-eu-1", MaxRuns: 2,
			Cost: 1_000_000, Clearance: placement.Internal, Labels: map[string]string{"region": "eu"}},
	}
	need := placement.Need{Clearance: placement.Confidential, Topology: map[string]string{"region": "eu"}}
	d, err := placement.Place(need, cells)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("chosen:", d.Cell == cells[0].ID)
	fmt.Println("load:", d.Candidates[0].Score.Load)
	fmt.Println("refused:", d.Refused[0].Cell == cells[1].ID, d.Refused[0].Reasons[0].Detail)
	// Output:
	// chosen: true
	// load: 250
	// refused: true clearance internal is below confidential
}
