"""What the test modules share: builders of the runs, flows and users a test starts from,
step handlers and small workflows that are no test's subject, and helpers that drive
threads, commands and hooks. One topic a module; a test's own workflows and handlers stay
in its module, beside the tests that use them."""
