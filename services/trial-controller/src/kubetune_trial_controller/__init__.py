"""kubetune trial-controller: runs each Trial as its job and keeps the Trial's conditions."""
