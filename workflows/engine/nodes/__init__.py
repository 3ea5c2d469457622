"""One module per node kind: how a step of that kind is entered, woken and settled."""
