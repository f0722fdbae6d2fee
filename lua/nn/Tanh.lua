-- nn.Tanh(): applies tanh elementwise.
return require('nn.simple').Tanh
