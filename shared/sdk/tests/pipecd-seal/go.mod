module gannet.test/pipecd-seal

go 1.22
