// Command siteserver serves the crawler example's site on loopback for
// make demo. It prints its base URL on the first line of stdout and serves
// until killed.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/agentrt/agentrt/examples/crawler/site"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on (loopback)")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stdout, "http://%s/\n", ln.Addr())
	log.Fatal(http.Serve(ln, site.Handler()))
}
