def @f0(%x: Tensor[(8, 8), f32]) -> Tensor[(8, 8), f32] {
  let %c1 = multiply(2.0f, 0.5f);
  let %v2 = add(%x, %c1);
  let %dead3 = tanh(%v2);
  let %v4 = negative(%v2);
  let %v5 = multiply(%v4, 1.75f);
  let %v6 = multiply(%v4, 1.75f);
  let %v7 = add(%v5, %v6);
  let %v8 = subtract(%v7, -0.25f);
  let %v9 = multiply(%v8, 1.25f);
  let %v10 = multiply(%v8, 1.25f);
  let %v11 = add(%v9, %v10);
  let %v12 = subtract(%v11, -0.375f);
  let %v13 = multiply(%v12, 1.0f);
  let %v14 = subtract(%v13, -0.375f);
  let %c15 = multiply(1.0f, 0.5f);
  let %v16 = add(%v14, %c15);
  let %v17 = relu(%v16);
  let %c18 = multiply(2.0f, 0.5f);
  let %v19 = add(%v17, %c18);
  let %dead20 = tanh(%v19);
  let %v21 = sigmoid(%v19);
  %v21
}

def @f1(%x: Tensor[(8, 8), f32]) -> Tensor[(8, 8), f32] {
  let %dead1 = tanh(%x);
  let %v2 = tanh(%x);
  let %c3 = multiply(2.0f, 0.5f);
  let %v4 = add(%v2, %c3);
  let %dead5 = tanh(%v4);
  let %v6 = relu(%v4);
  let %v7 = add(%v6, 0.0f);
  let %v8 = sigmoid(%v7);
  let %v9 = add(%v8, -0.375f);
  let %v10 = multiply(%v9, 1.0f);
  let %v11 = maximum(%v10, -0.5f);
  let %v12 = subtract(%v11, 0.0f);
  let %v13 = multiply(%v12, 0.125f);
  let %v14 = multiply(%v13, 1.0f);
  let %v15 = subtract(%v14, 0.25f);
  %v15
}

def @f2(%x: Tensor[(8, 8), f32]) -> Tensor[(8, 8), f32] {
  let %v1 = subtract(%x, 0.25f);
  let %v2 = maximum(%v1, 0.125f);
  let %v3 = relu(%v2);
  let %v4 = add(%v3, 0.0f);
  let %v5 = add(%v4, -0.125f);
  let %v6 = multiply(%v5, -0.125f);
  let %v7 = sigmoid(%v6);
  let %dead8 = tanh(%v7);
  let %v9 = negative(%v7);
  let %v10 = maximum(%v9, 0.0f);
  let %dead11 = tanh(%v10);
  let %v12 = relu(%v10);
  let %v13 = add(%v12, -0.5f);
  let %dead14 = tanh(%v13);
  let %v15 = sigmoid(%v13);
  %v15
}
