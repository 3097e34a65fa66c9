module example.com/payments-integration

go 1.19
