-- nn.Sigmoid(): applies sigmoid elementwise.
return require('nn.simple').Sigmoid
