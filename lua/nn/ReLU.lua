-- nn.ReLU(): applies relu elementwise.
return require('nn.simple').ReLU
